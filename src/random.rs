//! Secrets and identifiers from the operating system's CSPRNG.

/// Fills `buf` from the OS CSPRNG (`getrandom(2)`).
///
/// # Panics
/// When the kernel refuses randomness, which on Linux means a broken system: nothing safe can be
/// minted then.
pub fn fill(buf: &mut [u8]) {
    getrandom::fill(buf).expect("the OS random number generator failed");
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// A fresh 256-bit secret as 64 lowercase hex digits: safe in a header, a file and a shell word.
pub fn mint_token() -> String {
    let mut b = [0u8; 32];
    fill(&mut b);
    hex(&b)
}

/// A fresh 256-bit instance nonce (64 hex digits). Not secret: it tells one gateway launch from
/// another that took the same port.
pub fn mint_nonce() -> String {
    mint_token()
}

/// 128 random bits as 32 lowercase hex digits: an identifier nobody else can guess (a resumable
/// call's id).
pub fn hex_id() -> String {
    let mut b = [0u8; 16];
    fill(&mut b);
    hex(&b)
}

/// A random UUID version 4 as 32 lowercase hex digits, the form of AgentScope's ids.
pub fn uuid4_hex() -> String {
    let mut b = [0u8; 16];
    fill(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    hex(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_distinct_and_hex() {
        let (a, b) = (mint_token(), mint_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn ids_are_uuid4() {
        let id = uuid4_hex();
        assert_eq!(id.len(), 32);
        assert_eq!(&id[12..13], "4");
        assert!(matches!(&id[16..17], "8" | "9" | "a" | "b"));
    }
}
