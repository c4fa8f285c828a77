// placeholder until the codec lands
use super::{Codec, Decoded};
pub struct HttpCodec;
impl HttpCodec {
    pub fn new(_h: &str, _p: &str, _s: &str) -> Self {
        HttpCodec
    }
}
impl Codec for HttpCodec {
    fn encode(&mut self, _key: u64, _out: &mut Vec<u8>) {}
    fn decode(
        &mut self,
        _buf: &[u8],
        _key: u64,
        _verify: bool,
    ) -> Result<Decoded, crate::outcome::LookupError> {
        Ok(None)
    }
}
