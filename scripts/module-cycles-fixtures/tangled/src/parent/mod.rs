// No circle: a child builds on its parent's items (`use super::Item`), the parent declares it.
mod child;

pub struct Item;

pub fn make() -> child::Child {
    child::Child(Item)
}
