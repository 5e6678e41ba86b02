//! Identifiers: random version-4 UUIDs, as the API server gives `metadata.uid` and as a leader
//! election candidate names itself. Drawn through [`crate::random`], so a seeded thread repeats them.

/// A random version-4 UUID in its usual text form: 36 characters, lowercase hex, dashes after
/// the 8th, 12th, 16th and 20th digit (`1b4e28ba-2fa1-41d2-883f-0016d3cca427`).
pub fn uuid_v4() -> String {
    let mut bytes = [0u8; 16];
    crate::random::fill(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_in_the_rfc_4122_variant() {
        let uuid = uuid_v4();
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.matches('-').count(), 4);
        assert_eq!(&uuid[14..15], "4", "version 4: {uuid}");
        assert!("89ab".contains(&uuid[19..20]), "variant: {uuid}");
        assert_ne!(uuid, uuid_v4());
    }
}
