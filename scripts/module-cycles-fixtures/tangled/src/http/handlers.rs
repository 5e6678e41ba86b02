// Circle 1, first half: a sibling module imported as a whole through `super::` (no item after it).
use super::verbs;

pub fn handle() -> u8 {
    verbs::serve()
}

pub fn same_secret() -> bool {
    true
}
