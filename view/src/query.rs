//! Reading a URL's query string (`after=12&key=ns%2Fweb`) and its percent-encoded path
//! segments: just what the view's few routes need.

/// The value of parameter `name` in `query` (the part after `?`), percent-decoded; the first one
/// if it repeats.
pub(crate) fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decoded(key, true) == name).then(|| percent_decoded(value, true))
    })
}

/// `text` with each `%XX` replaced by its byte (and, in a query, each `+` by a space). A `%` not
/// followed by two hex digits stays as it is; bytes that are not UTF-8 become U+FFFD.
pub(crate) fn percent_decoded(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        let escaped = (byte == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .and_then(|hex| Some(hex_value(hex[0])? * 16 + hex_value(hex[1])?));
        match escaped {
            Some(value) => {
                decoded.push(value);
                at += 3;
            }
            None => {
                decoded.push(if plus_is_space && byte == b'+' {
                    b' '
                } else {
                    byte
                });
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_found_and_decoded() {
        let query = Some("after=12&key=ns%2Fweb+1&flag&key=second");
        assert_eq!(query_param(query, "after").as_deref(), Some("12"));
        assert_eq!(query_param(query, "key").as_deref(), Some("ns/web 1"));
        assert_eq!(query_param(query, "flag").as_deref(), Some(""));
        assert_eq!(query_param(query, "missing"), None);
        assert_eq!(query_param(None, "after"), None);
    }

    #[test]
    fn malformed_escapes_stay_as_they_are() {
        assert_eq!(percent_decoded("100%", false), "100%");
        assert_eq!(percent_decoded("%zz%4", false), "%zz%4");
        assert_eq!(percent_decoded("a+b%20c", false), "a+b c");
        assert_eq!(percent_decoded("%C3%A9", false), "é");
    }
}
