//! Building a query string: `?a=1&b=x%2Cy`, with values percent-encoded (selectors hold `=`, `,`, `!`,
//! parentheses and spaces).

use std::fmt::Write;

#[derive(Debug, Default)]
pub(crate) struct Query(String);

impl Query {
    pub(crate) fn pair(&mut self, key: &str, value: &str) {
        self.0.push(if self.0.is_empty() { '?' } else { '&' });
        self.0.push_str(key);
        self.0.push('=');
        for byte in value.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                self.0.push(char::from(byte));
            } else {
                // Writing to a String cannot fail.
                let _ = write!(self.0, "%{byte:02X}");
            }
        }
    }

    pub(crate) fn opt(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.pair(key, value);
        }
    }

    pub(crate) fn finish(self) -> String {
        self.0
    }
}
