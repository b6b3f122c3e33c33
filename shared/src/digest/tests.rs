use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use super::*;

#[test]
fn strings_and_options_never_run_into_each_other() {
    assert_ne!(encode(&("a", "b")).unwrap(), encode(&("ab", "")).unwrap());
    assert_ne!(encode(&(vec!["a"], "b")).unwrap(), encode(&(vec!["a", "b"], "")).unwrap());
    assert_ne!(encode(&(None::<u8>, Some(0u8))).unwrap(), encode(&(Some(0u8), None::<u8>)).unwrap());
    assert_eq!(encode(&Some("ab")).unwrap(), [1, 2, b'a', b'b']);
}

#[test]
fn a_map_hashes_the_same_whatever_order_it_is_walked_in() {
    let pairs: Vec<(String, u32)> = (0..200).map(|i| (format!("key{i}"), i)).collect();
    let sorted: BTreeMap<String, u32> = pairs.iter().cloned().collect();
    // Each `HashMap` has its own random seed, so each walks its entries in another order.
    let maps: Vec<HashMap<String, u32>> = (0..4).map(|_| pairs.iter().rev().cloned().collect()).collect();
    for map in &maps {
        assert_eq!(digest_of(map), digest_of(&sorted));
    }
    let mut other = sorted.clone();
    other.insert("key7".into(), 8);
    assert_ne!(digest_of(&other), digest_of(&sorted));
}

#[test]
fn addresses_encode_as_their_octets() {
    let v4: SocketAddr = "10.0.0.1:80".parse().unwrap();
    let v6: SocketAddr = "[::ffff:10.0.0.1]:80".parse().unwrap();
    assert_eq!(encode(&v4).unwrap(), [0, 10, 0, 0, 1, 0, 80]);
    assert_ne!(digest_of(&v4), digest_of(&v6));
}

#[derive(serde::Serialize)]
struct SometimesSkipped {
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<u8>,
}

#[test]
fn what_cannot_be_canonical_is_refused() {
    assert!(matches!(encode(&SometimesSkipped { field: None }), Err(EncodeError::SkippedField("field"))));
    assert!(encode(&SometimesSkipped { field: Some(1) }).is_ok());
    assert!(matches!(encode(&1.5f64), Err(EncodeError::Float)));
    struct Unsized;
    impl serde::Serialize for Unsized {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(std::iter::from_fn(|| None::<u8>).filter(|_| true))
        }
    }
    assert!(matches!(encode(&Unsized), Err(EncodeError::UnknownLength)));
}

#[test]
fn lengths_take_one_byte_below_128() {
    assert_eq!(encode("").unwrap(), [0]);
    assert_eq!(encode(&"x".repeat(127)).unwrap()[0], 127);
    assert_eq!(encode(&"x".repeat(300)).unwrap()[..2], [0xac, 0x02]);
}
