//! Format tests: round trips, golden bytes, and corruption always giving a typed error.

use proptest::prelude::*;

use super::file::encode;
use super::*;

fn sections() -> Vec<(u32, Vec<u8>)> {
    vec![(0x0000_0001, b"hello".to_vec()), (0x0000_0002, vec![7u8; 100]), (0x0000_0003, Vec::new())]
}

fn as_refs(sections: &[(u32, Vec<u8>)]) -> Vec<(u32, &[u8])> {
    sections.iter().map(|(t, b)| (*t, b.as_slice())).collect()
}

#[test]
fn round_trip_in_memory_and_on_disk() {
    let owned = sections();
    let bytes = encode(&as_refs(&owned)).unwrap();
    let file = SegmentFile::from_bytes(SegmentBytes::copy_from(&bytes), true).unwrap();
    assert_eq!(file.tags().collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(file.section(1).unwrap(), b"hello");
    assert_eq!(file.section(2).unwrap(), &[7u8; 100][..]);
    assert_eq!(file.section(3).unwrap(), b"");
    assert!(file.section(4).is_none());
    assert!(matches!(file.require(4), Err(FormatError::MissingSection(4))));

    let dir = std::env::temp_dir().join(format!("strata-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("seg");
    std::fs::write(&path, &bytes).unwrap();
    let mapped = SegmentFile::open(&path, true).unwrap();
    assert_eq!(mapped.section(2).unwrap(), &[7u8; 100][..]);
    for tag in [1, 2, 3] {
        let offset = mapped.section(tag).unwrap().as_ptr() as usize - mapped.section(1).unwrap().as_ptr() as usize;
        assert_eq!(offset % SECTION_ALIGN, 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// CRC-32 of the golden file's 131 bytes.
const GOLDEN_FILE_CRC: u32 = 0xCC33_4CBE;

/// Pins the byte format: a change here is a format change and needs a new version number.
#[test]
fn golden_bytes() {
    let bytes = encode(&[(0xABCD_0001, b"xyz".as_slice())]).unwrap();
    assert_eq!(bytes.len(), 131);
    let header: [u8; 64] = bytes[..64].try_into().unwrap();
    let mut expected = Vec::new();
    expected.extend_from_slice(b"STRATSEG");
    expected.extend_from_slice(&1u32.to_le_bytes());
    expected.extend_from_slice(&1u32.to_le_bytes());
    expected.extend_from_slice(&131u64.to_le_bytes());
    expected.extend_from_slice(&64u64.to_le_bytes());
    let table = &bytes[64..96];
    expected.extend_from_slice(&crc32fast::hash(table).to_le_bytes());
    expected.resize(60, 0);
    let crc = crc32fast::hash(&expected);
    expected.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(header.to_vec(), expected);
    assert_eq!(
        table,
        [
            0x01, 0x00, 0xCD, 0xAB, 0, 0, 0, 0, // tag, reserved
            128, 0, 0, 0, 0, 0, 0, 0, // offset
            3, 0, 0, 0, 0, 0, 0, 0, // length
        ]
        .iter()
        .copied()
        .chain(crc32fast::hash(b"xyz").to_le_bytes())
        .chain([0, 0, 0, 0])
        .collect::<Vec<u8>>()
        .as_slice()
    );
    assert_eq!(&bytes[96..128], &[0u8; 32]);
    assert_eq!(&bytes[128..], b"xyz");
    assert_eq!(crc32fast::hash(&bytes), GOLDEN_FILE_CRC, "the whole encoding is pinned");
}

#[test]
fn specific_corruptions_are_typed_errors() {
    let good = encode(&as_refs(&sections())).unwrap();
    let open = |bytes: &[u8]| SegmentFile::from_bytes(SegmentBytes::copy_from(bytes), true);
    assert!(matches!(open(&good[..10]), Err(FormatError::Truncated { .. })));
    assert!(matches!(open(&good[..good.len() - 1]), Err(FormatError::Truncated { .. })));
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(matches!(open(&bad), Err(FormatError::BadMagic)));
    let mut bad = good.clone();
    bad[70] ^= 1;
    assert!(matches!(open(&bad), Err(FormatError::ChecksumMismatch { .. })));
    let mut bad = good.clone();
    bad[256 + 5] ^= 0xFF; // inside section 2 (offset 256, 100 bytes)
    assert!(matches!(open(&bad), Err(FormatError::ChecksumMismatch { .. })));
    assert!(SegmentFile::from_bytes(SegmentBytes::copy_from(&bad), false).is_ok(), "section checksums are optional");
    let mut padded = good.clone();
    let last = padded.len() - 1;
    padded[last] ^= 0xFF; // trailing zero padding before the empty last section
    assert!(matches!(open(&padded), Err(FormatError::Corrupt(_))));
    let mut longer = good.clone();
    longer.push(0);
    assert!(matches!(open(&longer), Err(FormatError::Corrupt(_))));
    assert!(matches!(encode(&[(1, b"a".as_slice()), (1, b"b".as_slice())]), Err(FormatError::DuplicateSection(1))));
}

proptest! {
    #[test]
    fn random_damage_never_panics(flips in prop::collection::vec((0usize..400, any::<u8>()), 1..8), cut in 0usize..400) {
        let good = encode(&as_refs(&sections())).unwrap();
        let mut bad = good.clone();
        for (at, byte) in flips {
            let at = at % bad.len();
            bad[at] ^= byte | 1;
        }
        let result = SegmentFile::from_bytes(SegmentBytes::copy_from(&bad), true);
        // Every byte is covered by a checksum or must be zero padding: damage is always detected.
        prop_assert!(result.is_err());
        let cut = cut.min(good.len());
        let truncated = SegmentFile::from_bytes(SegmentBytes::copy_from(&good[..cut]), true);
        prop_assert!(cut == good.len() || truncated.is_err());
    }
}
