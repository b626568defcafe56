//! Pre-shared-key authentication of control connections: owns the key's file format, the
//! nonces, the exact MAC inputs (the transcript) and their HMAC-SHA256 computation and
//! constant-time check; must not read files, draw random numbers or touch the network.
//!
//! The exchange (docs/protocol.md, "Authentication"): the client sends its request; the server
//! answers `auth_challenge {nonce}` (32 fresh random bytes); the client answers
//! `auth_response {nonce, mac}` with `mac = HMAC(key, transcript(CLIENT_LABEL, ...))`; the
//! server checks it and proves its own knowledge of the key with `auth_ok {mac}`, a MAC over
//! the same transcript under [`SERVER_LABEL`]. A recorded response is useless on another
//! connection (another server nonce), and it cannot be moved onto another request (the request's
//! exact bytes are in the transcript).

use ring::hmac;

/// Shortest key accepted, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// Longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 4096;
/// Length of each side's nonce, in bytes.
pub const NONCE_LEN: usize = 32;
/// Length of an HMAC-SHA256 tag, in bytes.
pub const MAC_LEN: usize = 32;
/// Domain-separation label of the client's MAC.
pub const CLIENT_LABEL: &[u8] = b"wirebench/1 psk client";
/// Domain-separation label of the server's MAC.
pub const SERVER_LABEL: &[u8] = b"wirebench/1 psk server";

/// A pre-shared key. Its bytes are never printed (`Debug` shows only the length).
#[derive(Clone)]
pub struct Psk {
    key: hmac::Key,
    len: usize,
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Psk({} bytes)", self.len)
    }
}

/// Why a key file's contents are not a usable key; one line, for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_LEN`] bytes after trimming.
    #[error("the key is {0} bytes long: at least {MIN_KEY_LEN} are required (e.g. `head -c 32 /dev/urandom | base64 > FILE`)")]
    TooShort(usize),
    /// More than [`MAX_KEY_LEN`] bytes after trimming.
    #[error("the key is {0} bytes long: at most {MAX_KEY_LEN} are allowed")]
    TooLong(usize),
}

/// Why an authentication message is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A nonce or MAC that is not lowercase-or-uppercase hex of the right length.
    #[error("{what} is not {len} bytes of hex")]
    BadEncoding {
        /// Which field.
        what: &'static str,
        /// Expected length in bytes.
        len: usize,
    },
    /// The MAC does not match: the peer does not hold the same key (or replayed an old one).
    #[error("authentication failed")]
    Mismatch,
}

impl Psk {
    /// The key held by a key file: its contents with leading and trailing ASCII whitespace
    /// removed (so `base64` or `xxd -p` output with its newline works), [`MIN_KEY_LEN`] to
    /// [`MAX_KEY_LEN`] bytes. The bytes are used as they are, not decoded.
    pub fn from_file_contents(contents: &[u8]) -> Result<Psk, KeyError> {
        let key = contents.trim_ascii();
        if key.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort(key.len()));
        }
        if key.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(key.len()));
        }
        Ok(Psk {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            len: key.len(),
        })
    }

    /// The MAC of `transcript(label, server_nonce, client_nonce, request)`.
    pub fn mac(
        &self,
        label: &[u8],
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
        request: &[u8],
    ) -> [u8; MAC_LEN] {
        let tag = hmac::sign(
            &self.key,
            &transcript(label, server_nonce, client_nonce, request),
        );
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Checks `mac` against the transcript in constant time (ring's `hmac::verify`).
    pub fn verify(
        &self,
        label: &[u8],
        server_nonce: &[u8; NONCE_LEN],
        client_nonce: &[u8; NONCE_LEN],
        request: &[u8],
        mac: &[u8; MAC_LEN],
    ) -> Result<(), AuthError> {
        hmac::verify(
            &self.key,
            &transcript(label, server_nonce, client_nonce, request),
            mac,
        )
        .map_err(|_| AuthError::Mismatch)
    }
}

/// The exact bytes a MAC covers: `label | 0x00 | server_nonce (32) | client_nonce (32) |
/// request`, where `request` is the body of the client's request frame exactly as it was sent
/// (the JSON, without the 4-byte length). The label has no 0x00 byte, so the layout is
/// unambiguous; the nonces have fixed lengths and the request is last.
pub fn transcript(
    label: &[u8],
    server_nonce: &[u8; NONCE_LEN],
    client_nonce: &[u8; NONCE_LEN],
    request: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(label.len() + 1 + 2 * NONCE_LEN + request.len());
    out.extend_from_slice(label);
    out.push(0);
    out.extend_from_slice(server_nonce);
    out.extend_from_slice(client_nonce);
    out.extend_from_slice(request);
    out
}

/// Lowercase hex of `bytes`, as nonces and MACs travel in control messages.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// Parses exactly `N` bytes of hex (either case); `what` names the field in the error.
pub fn from_hex<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N], AuthError> {
    let bad = AuthError::BadEncoding { what, len: N };
    let raw = text.as_bytes();
    if raw.len() != 2 * N {
        return Err(bad);
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(raw.chunks_exact(2)) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(hi), Some(lo)) => *byte = hi << 4 | lo,
            _ => return Err(bad),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Psk {
        Psk::from_file_contents(b"  0123456789abcdef-secret\n").unwrap()
    }

    #[test]
    fn key_file_format() {
        assert_eq!(
            Psk::from_file_contents(b"short\n").unwrap_err(),
            KeyError::TooShort(5)
        );
        assert_eq!(
            Psk::from_file_contents(b"\n\n \t").unwrap_err(),
            KeyError::TooShort(0)
        );
        assert!(Psk::from_file_contents(&[b'k'; 16]).is_ok());
        assert_eq!(
            Psk::from_file_contents(&[b'k'; MAX_KEY_LEN + 1]).unwrap_err(),
            KeyError::TooLong(MAX_KEY_LEN + 1)
        );
        assert_eq!(format!("{:?}", key()), "Psk(23 bytes)");
        // Surrounding whitespace is not part of the key.
        let a = Psk::from_file_contents(b"0123456789abcdef-secret").unwrap();
        let (s, c) = ([1; NONCE_LEN], [2; NONCE_LEN]);
        assert_eq!(
            a.mac(CLIENT_LABEL, &s, &c, b"{}"),
            key().mac(CLIENT_LABEL, &s, &c, b"{}")
        );
    }

    #[test]
    fn transcript_exact_bytes() {
        let t = transcript(b"L", &[0xAA; NONCE_LEN], &[0xBB; NONCE_LEN], b"{}");
        let mut want = vec![b'L', 0];
        want.extend_from_slice(&[0xAA; NONCE_LEN]);
        want.extend_from_slice(&[0xBB; NONCE_LEN]);
        want.extend_from_slice(b"{}");
        assert_eq!(t, want);
    }

    #[test]
    fn hmac_sha256_known_answer() {
        // RFC 4231 test case 2 ("Jefe" is too short for a key file, so sign directly).
        let k = hmac::Key::new(hmac::HMAC_SHA256, b"Jefe");
        let tag = hmac::sign(&k, b"what do ya want for nothing?");
        assert_eq!(
            to_hex(tag.as_ref()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn mac_binds_nonces_request_label_and_key() {
        let k = key();
        let (s, c) = ([7; NONCE_LEN], [9; NONCE_LEN]);
        let mac = k.mac(CLIENT_LABEL, &s, &c, b"request");
        assert_eq!(k.verify(CLIENT_LABEL, &s, &c, b"request", &mac), Ok(()));
        let fail = Err(AuthError::Mismatch);
        assert_eq!(
            k.verify(CLIENT_LABEL, &[8; NONCE_LEN], &c, b"request", &mac),
            fail
        );
        assert_eq!(
            k.verify(CLIENT_LABEL, &s, &[8; NONCE_LEN], b"request", &mac),
            fail
        );
        assert_eq!(k.verify(CLIENT_LABEL, &s, &c, b"requesT", &mac), fail);
        // The server's proof is not the client's: a reflected MAC does not pass.
        assert_eq!(k.verify(SERVER_LABEL, &s, &c, b"request", &mac), fail);
        let other = Psk::from_file_contents(b"another key of 16+ bytes").unwrap();
        assert_eq!(other.verify(CLIENT_LABEL, &s, &c, b"request", &mac), fail);
    }

    #[test]
    fn hex_round_trip_and_errors() {
        let bytes = [0x00, 0x0f, 0xa0, 0xff];
        assert_eq!(to_hex(&bytes), "000fa0ff");
        assert_eq!(from_hex::<4>("000FA0ff", "nonce"), Ok(bytes));
        let bad = Err(AuthError::BadEncoding {
            what: "nonce",
            len: 4,
        });
        assert_eq!(from_hex::<4>("000fa0f", "nonce"), bad);
        assert_eq!(from_hex::<4>("000fa0fg", "nonce"), bad);
        assert_eq!(from_hex::<4>("000fa0ff00", "nonce"), bad);
        assert_eq!(
            from_hex::<4>("zz", "mac").unwrap_err().to_string(),
            "mac is not 4 bytes of hex"
        );
    }
}
