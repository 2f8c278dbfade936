//! The Ogg/Opus stream codec: pages and CRCs, chunked reading, a sine
//! through libopus and back.

use super::support::{sine, FRAME, RATE};
use voxlane_machines::serve::codec::{CodecError, OpusStreamDecoder, OpusStreamEncoder};
use voxlane_runtime::io::ogg::{
    crc32, parse_opus_head, OggError, OpusHead, PageReader, PageWriter, MAX_PACKET_LEN,
};

#[test]
fn ogg_crc_matches_the_reference_value() {
    // Ogg's CRC (poly 0x04c11db7, no reflection, init 0, no final xor) of "123456789".
    assert_eq!(crc32(b"123456789"), 0x89a1_897f);
}

#[test]
fn ogg_pages_round_trip_in_any_chunking() {
    let mut w = PageWriter::new(7);
    let packets: Vec<Vec<u8>> = [0usize, 1, 254, 255, 256, 510, 3000]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 31 % 251) as u8).collect())
        .collect();
    let bytes: Vec<u8> = packets
        .iter()
        .enumerate()
        .flat_map(|(i, p)| w.page(p, i as u64).unwrap())
        .collect();
    assert_eq!(&bytes[..4], b"OggS");
    assert_eq!(bytes[5] & 0x02, 0x02, "the first page begins the stream");
    for chunk in [1, 7, 100, bytes.len()] {
        let mut r = PageReader::new();
        let mut got = Vec::new();
        for c in bytes.chunks(chunk) {
            r.push(c).unwrap();
            while let Some(p) = r.next_packet() {
                got.push(p);
            }
        }
        assert_eq!(got, packets, "chunks of {chunk} bytes");
    }
}

#[test]
fn ogg_reader_rejects_corruption() {
    let mut w = PageWriter::new(1);
    let mut page = w.page(b"hello", 0).unwrap();
    let last = page.len() - 1;
    page[last] ^= 1;
    assert!(matches!(
        PageReader::new().push(&page),
        Err(OggError::Checksum { .. })
    ));
    assert!(matches!(
        PageReader::new().push(b"RIFF...."),
        Err(OggError::CapturePattern)
    ));
    assert!(
        PageReader::new().push(b"Og").is_ok(),
        "a prefix of a page waits for more"
    );
}

#[test]
fn ogg_reader_bounds_a_packet_continued_across_pages() {
    // Pages of 255 full segments, each continuing the last: the packet never
    // ends, and the reader refuses it once it passes its bound.
    let body = vec![7u8; 255 * 255];
    let mut refused = None;
    let mut r = PageReader::new();
    for seq in 0..(MAX_PACKET_LEN / body.len() + 2) as u32 {
        let mut page = Vec::new();
        page.extend_from_slice(b"OggS");
        page.push(0);
        page.push(if seq == 0 { 0x02 } else { 0x01 });
        page.extend_from_slice(&0u64.to_le_bytes());
        page.extend_from_slice(&1u32.to_le_bytes());
        page.extend_from_slice(&seq.to_le_bytes());
        page.extend_from_slice(&[0; 4]);
        page.push(255);
        page.extend(std::iter::repeat_n(255u8, 255));
        page.extend_from_slice(&body);
        let crc = crc32(&page);
        page[22..26].copy_from_slice(&crc.to_le_bytes());
        if let Err(e) = r.push(&page) {
            refused = Some(e);
            break;
        }
        assert!(
            r.next_packet().is_none(),
            "an unfinished packet is not given out"
        );
    }
    assert_eq!(refused, Some(OggError::Oversized(MAX_PACKET_LEN)));
}

#[test]
fn opus_head_is_parsed_and_checked() {
    let mut head = b"OpusHead".to_vec();
    head.extend_from_slice(&[1, 2]);
    head.extend_from_slice(&312u16.to_le_bytes());
    head.extend_from_slice(&24_000u32.to_le_bytes());
    head.extend_from_slice(&(-256i16).to_le_bytes());
    head.push(0);
    assert_eq!(
        parse_opus_head(&head),
        Ok(OpusHead {
            channels: 2,
            pre_skip: 312,
            input_rate: 24_000,
            gain: -256
        })
    );
    assert!(parse_opus_head(&head[..18]).is_err(), "too short");
    let mut six = head.clone();
    six[9] = 6;
    assert_eq!(
        parse_opus_head(&six),
        Err(OggError::Head("not mono or stereo"))
    );
    let mut family = head.clone();
    family[18] = 1;
    assert!(parse_opus_head(&family).is_err(), "multichannel family");
    let mut major = head;
    major[8] = 0x10;
    assert!(parse_opus_head(&major).is_err(), "major version 1");
}

#[test]
fn opus_stream_round_trips_a_sine() {
    let frames = 25;
    let input = sine(440.0, frames);
    let mut enc = OpusStreamEncoder::new(RATE).unwrap();
    let mut stream = enc.header_pages().unwrap();
    for f in input.chunks_exact(FRAME) {
        stream.extend(enc.encode_page(f).unwrap());
    }
    let mut dec = OpusStreamDecoder::new(RATE).unwrap();
    let mut out = Vec::new();
    // Fed in odd chunks, as websocket messages may split it.
    for c in stream.chunks(333) {
        dec.push(c, &mut out).unwrap();
    }
    assert_eq!(
        out.len(),
        input.len(),
        "one 80 ms packet per frame decodes to 1920 samples"
    );
    // Best normalised correlation over the codec's delay (a few ms).
    let best = (0..400)
        .map(|lag| {
            let (a, b) = (&input[..input.len() - lag], &out[lag..]);
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
            dot / (na * nb).max(1e-9)
        })
        .fold(f32::MIN, f32::max);
    assert!(best > 0.95, "correlation {best}");
}

#[test]
fn opus_refuses_bad_rates_frames_and_headless_audio() {
    assert!(matches!(
        OpusStreamEncoder::new(22_050),
        Err(CodecError::SampleRate(22_050))
    ));
    let mut enc = OpusStreamEncoder::new(RATE).unwrap();
    assert!(matches!(
        enc.encode_page(&[0.0; 1000]),
        Err(CodecError::FrameSize { len: 1000, .. })
    ));
    let page = enc.encode_page(&[0.0; FRAME]).unwrap();
    let mut dec = OpusStreamDecoder::new(RATE).unwrap();
    assert!(matches!(
        dec.push(&page, &mut Vec::new()),
        Err(CodecError::MissingHead)
    ));
}
