//! A bounds-checked reader over a byte slice. Every read returns `None` past the end, so
//! decoding code cannot index out of bounds (the crate denies panicking indexing).

#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf }
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }
    #[inline]
    pub fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.buf.split_first()?;
        self.buf = rest;
        Some(b)
    }
    #[inline]
    pub fn u16(&mut self) -> Option<u16> {
        let (b, rest) = self.buf.split_first_chunk::<2>()?;
        self.buf = rest;
        Some(u16::from_be_bytes(*b))
    }
    #[inline]
    pub fn u32(&mut self) -> Option<u32> {
        let (b, rest) = self.buf.split_first_chunk::<4>()?;
        self.buf = rest;
        Some(u32::from_be_bytes(*b))
    }
    #[inline]
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, rest) = self.buf.split_at_checked(n)?;
        self.buf = rest;
        Some(a)
    }
}
