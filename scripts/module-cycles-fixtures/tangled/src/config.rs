// Circle 2, second half: a path in a field's type, not in a `use`.
pub struct Config {
    pub retry: crate::client::Retry,
}
