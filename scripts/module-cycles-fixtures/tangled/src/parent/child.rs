use super::Item;

pub struct Child(pub Item);
