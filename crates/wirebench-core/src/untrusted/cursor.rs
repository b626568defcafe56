//! A forgiving reader over fuzz input: owns turning arbitrary bytes into numbers and slices for the
//! harnesses; must not fail (an exhausted input reads as zeros).

/// Reads big-endian numbers and slices off the front of the input; past the end, numbers are 0
/// and slices are empty, so every input is a valid program for a harness.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub(crate) fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    pub(crate) fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    pub(crate) fn u16(&mut self) -> u16 {
        self.number(2) as u16
    }

    pub(crate) fn u32(&mut self) -> u32 {
        self.number(4) as u32
    }

    pub(crate) fn u64(&mut self) -> u64 {
        self.number(8)
    }

    /// A probability in [0, 1] from two bytes.
    pub(crate) fn probability(&mut self) -> f64 {
        f64::from(self.u16()) / f64::from(u16::MAX)
    }

    /// `width` bytes big endian; missing bytes count as 0.
    fn number(&mut self, width: usize) -> u64 {
        self.bytes(width)
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_zeros_past_the_end() {
        let mut c = Cursor::new(&[1, 2, 3, 4, 5]);
        assert_eq!(c.u16(), 0x0102);
        assert_eq!(c.u8(), 3);
        assert_eq!(c.u32(), 0x0405);
        assert!(c.is_empty());
        assert_eq!(c.u64(), 0);
        assert_eq!(c.bytes(3), b"");
    }
}
