//! The proto table's own message types: a replica group shared by its
//! instructions and a message sized once encode and decode as the plain
//! messages do, and each declared schema's field numbers are distinct.

use hlatc_compiler::formats::proto::messages::{
    ListedGroup, ReplicaGroup, SizedOnce, SliceDimensions, DECLARED,
};
use hlatc_compiler::ir::collective::GroupList;
use prost::Message;

#[test]
fn a_shared_group_encodes_as_its_ids_do() {
    let list = GroupList::new(vec![vec![0, 1, 200, 4096], vec![5], vec![]]);
    for (shared, ids) in ListedGroup::all_of(&list).iter().zip(list.groups()) {
        let read = ListedGroup::new(ids.clone());
        let plain = ReplicaGroup {
            replica_ids: ids.clone(),
        };
        assert_eq!(shared.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(read.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(shared.encoded_len(), plain.encoded_len());
        assert_eq!(shared, &read);
    }
    // 200 and 4096 take two varint bytes each: 1 + 1 + 6.
    assert_eq!(ListedGroup::all_of(&list)[0].encoded_len(), 8);
}

#[test]
fn a_group_decodes_to_its_ids_and_merges_into_a_shared_one() {
    let bytes = ReplicaGroup {
        replica_ids: vec![3, 1, 2],
    }
    .encode_to_vec();
    let read = ListedGroup::decode(bytes.as_slice()).unwrap();
    assert_eq!(read.replica_ids(), [3, 1, 2]);
    let mut shared = ListedGroup::all_of(&GroupList::new(vec![vec![7]])).remove(0);
    shared.merge(bytes.as_slice()).unwrap();
    assert_eq!(shared.replica_ids(), [7, 3, 1, 2]);
}

#[test]
fn it_encodes_and_decodes_as_the_message_does() {
    let plain = SliceDimensions {
        start: 3,
        limit: 300,
        stride: 1,
    };
    let sized = SizedOnce::new(plain.clone());
    assert_eq!(sized.encoded_len(), plain.encoded_len());
    assert_eq!(sized.encode_to_vec(), plain.encode_to_vec());
    let back = SizedOnce::<SliceDimensions>::decode(plain.encode_to_vec().as_slice()).unwrap();
    assert_eq!(*back, plain);
}

#[test]
fn a_change_is_sized_again() {
    let mut group = SizedOnce::new(ReplicaGroup {
        replica_ids: vec![1],
    });
    assert_eq!(group.encoded_len(), 3);
    group.replica_ids.extend([2, 300]);
    assert_eq!(group.encoded_len(), 6);
    let more = ReplicaGroup {
        replica_ids: vec![4],
    }
    .encode_to_vec();
    group.merge(more.as_slice()).unwrap();
    assert_eq!(group.replica_ids, [1, 2, 300, 4]);
    assert_eq!(group.encoded_len(), 7);
    group.clear();
    assert_eq!(group.encoded_len(), 0);
}

/// prost refuses a number twice among a message's fields; one listed
/// as unmodeled must not be modeled or listed twice either, or a
/// refusal would name the wrong field.
#[test]
fn unmodeled_numbers_are_distinct_and_not_modeled() {
    for schema in DECLARED.iter().map(|s| s()) {
        for (k, (n, name)) in schema.unmodeled.iter().enumerate() {
            let twice = schema.unmodeled[..k].iter().any(|(m, _)| m == n);
            let modeled = schema.fields.iter().any(|f| f.number == *n);
            assert!(!twice && !modeled, "{}: field {n} ({name})", schema.name);
        }
    }
}

/// The schema names each field as the proto does: a keyword field
/// (`r#type`) without its raw prefix, any other as written.
#[test]
fn a_keyword_field_is_named_without_its_raw_prefix() {
    let sharding = DECLARED
        .iter()
        .map(|s| s())
        .find(|s| s.name == "OpSharding")
        .unwrap();
    let name = |number| {
        let field = sharding.fields.iter().find(|f| f.number == number);
        field.map(|f| f.name)
    };
    assert_eq!(name(1), Some("type"));
    assert_eq!(name(2), Some("tile_shape"));
}
