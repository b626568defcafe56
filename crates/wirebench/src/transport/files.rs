//! Reading a file the user names (a key, a certificate, a campaign to import, standard input):
//! never more than a stated bound, so `--psk /dev/zero` or `import /dev/zero` is refused with
//! a line that names the bound instead of growing memory until the process dies.

use std::io::Read;
use std::path::Path;

/// Most bytes of a pre-shared key file (`--psk`): a key is a line of hex.
pub const KEY_FILE_MAX: u64 = 64 << 10;

/// Most bytes of a PEM file (a certificate chain, a private key, a CA list).
pub const PEM_FILE_MAX: u64 = 1 << 20;

/// Most bytes of a campaign document `import` reads (a file or standard input).
pub const IMPORT_FILE_MAX: u64 = 256 << 20;

/// Why a bounded read failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It holds more than the bound.
    #[error("it holds more than {} bytes, the most read from such a file", .0)]
    TooLarge(u64),
}

/// The whole of `path`, if it holds at most `limit` bytes.
pub fn read_at_most(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    read_from(std::fs::File::open(path)?, limit)
}

/// The whole of standard input, if it holds at most `limit` bytes.
pub fn read_stdin_at_most(limit: u64) -> Result<Vec<u8>, ReadError> {
    read_from(std::io::stdin().lock(), limit)
}

/// Reads at most one byte past `limit`, so a larger source is told apart without reading it.
fn read_from(source: impl Read, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    source.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(ReadError::TooLarge(limit));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_up_to_the_bound_is_read_whole_and_a_larger_one_refused() {
        assert_eq!(read_from(&b"abcd"[..], 4).unwrap(), b"abcd");
        assert!(matches!(
            read_from(&b"abcde"[..], 4),
            Err(ReadError::TooLarge(4))
        ));
        // An endless source is refused after limit + 1 bytes.
        assert!(matches!(
            read_from(std::io::repeat(0), 1 << 10),
            Err(ReadError::TooLarge(1024))
        ));
    }

    #[test]
    fn dev_zero_is_refused_at_the_bound() {
        let refused = read_at_most(Path::new("/dev/zero"), KEY_FILE_MAX);
        assert!(matches!(refused, Err(ReadError::TooLarge(KEY_FILE_MAX))));
    }
}
