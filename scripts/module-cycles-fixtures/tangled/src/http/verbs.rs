// Circle 1, second half: a path in an expression, not in a `use`.
pub fn serve() -> u8 {
    u8::from(super::handlers::same_secret())
}

#[cfg(test)]
mod tests {
    // Test code may import from anywhere: no circle.
    use crate::http::handlers::handle;

    #[test]
    fn serves() {
        assert_eq!(handle(), 1);
    }
}
