//! The `histogram` field of a run: its latency HdrHistogram, V2 deflate, base64.

use crate::error::ConfigError;

/// V2 deflate encoding, base64: the format HistogramLogProcessor and `hdrhistogram` read.
pub fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> String {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut buf = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
        return String::new();
    }
    base64_encode(&buf)
}

pub fn decode_histogram(s: &str) -> Result<hdrhistogram::Histogram<u64>, ConfigError> {
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64_decode(s).ok_or("histogram is not valid base64")?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| ConfigError(format!("histogram does not decode: {e:?}")))
}

pub fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for len in 0..20 {
            let v: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(base64_decode(&base64_encode(&v)).unwrap(), v);
        }
        assert_eq!(base64_encode(b"foob"), "Zm9vYg==");
    }

    #[test]
    fn histogram_round_trip() {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 100_000_000_000, 3).unwrap();
        for v in [1_000u64, 2_000, 50_000, 1_000_000] {
            h.record(v).unwrap();
        }
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
    }
}
