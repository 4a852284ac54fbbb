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

/// Compares two secrets in time that depends only on their lengths, so a caller learns nothing
/// from timing about how much of a guess was right.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    // black_box keeps the optimiser from turning the fold into an early exit.
    std::hint::black_box(diff) == 0
}

/// How many identifiers one refill of a thread's pool serves.
const POOL_IDS: usize = 32;

/// 16 bytes of the OS CSPRNG's output for an identifier. Each thread keeps a pool refilled by
/// one `getrandom(2)` per [`POOL_IDS`] identifiers (a system call per id was most of the cost
/// of a chunk's ids); no byte is handed out twice, and a forked child, which inherits a copy
/// of the pool, refills it before its first id.
fn id_bytes() -> [u8; 16] {
    use std::cell::RefCell;
    struct Pool {
        pid: u32,
        used: usize,
        bytes: [u8; 16 * POOL_IDS],
    }
    thread_local! {
        static POOL: RefCell<Pool> = const {
            RefCell::new(Pool { pid: 0, used: POOL_IDS, bytes: [0; 16 * POOL_IDS] })
        };
    }
    POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        let pid = std::process::id();
        if pool.used == POOL_IDS || pool.pid != pid {
            fill(&mut pool.bytes);
            pool.pid = pid;
            pool.used = 0;
        }
        let at = pool.used * 16;
        pool.used += 1;
        let mut out = [0u8; 16];
        out.copy_from_slice(&pool.bytes[at..at + 16]);
        // What was handed out does not stay behind in the pool.
        pool.bytes[at..at + 16].fill(0);
        out
    })
}

/// 128 random bits as 32 lowercase hex digits: an identifier nobody else can guess (a resumable
/// call's id).
pub fn hex_id() -> String {
    hex(&id_bytes())
}

/// A random UUID version 4 as 32 lowercase hex digits, the form of AgentScope's ids (chunk and
/// block ids too).
pub fn uuid4_hex() -> String {
    let mut b = id_bytes();
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
    fn ids_are_distinct_uuid4s() {
        let ids: std::collections::HashSet<String> = (0..10_000).map(|_| uuid4_hex()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            assert_eq!(id.len(), 32);
            assert_eq!(&id[12..13], "4", "{id}");
            assert!(matches!(&id[16..17], "8" | "9" | "a" | "b"), "{id}");
        }
        let call_ids: std::collections::HashSet<String> = (0..1000).map(|_| hex_id()).collect();
        assert_eq!(call_ids.len(), 1000);
        assert!(
            call_ids
                .iter()
                .all(|id| id.len() == 32 && !ids.contains(id))
        );
    }
}
