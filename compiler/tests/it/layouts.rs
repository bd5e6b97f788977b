//! Layouts beyond the order of dimensions (`{1,0:T(8,128)(2,1)S(1)}`):
//! read, printed and carried through the proto as written, refused by
//! name where hlatc does not model an item, checked by the verifier (those
//! two in golden files: `compiler/tests/filetests/{parse,verify}/layout_*.hlo`).

use hlatc_compiler::{
    formats::proto, formats::text, verify, PhysicalLayout, Shape, SplitConfig, COMBINE_DIMENSION,
};

const MODULE: &str = "HloModule m, entry_computation_layout={(f32[8,256]{1,0:T(8,128)S(1)}, f32[]{:T(128)})->f32[8,256]{1,0:T(8,128)(2,1)E(32)}}

ENTRY e {
  k = f32[]{:S(2)} constant(1.5)
  p = f32[8,256]{1,0:T(8,128)S(1)} parameter(0)
  s = f32[]{:T(128)} parameter(1)
  b = f32[8,256]{1,0} broadcast(s), dimensions={}
  c = f32[8,256]{0,1:T(8,*)L(2)SC(0:4)SC(1:64,128)} add(p, b)
  ROOT r = f32[8,256]{1,0:T(8,128)(2,1)E(32)} copy(c)
}
";

#[test]
fn every_item_is_read_and_printed_back_as_written() {
    let m = text::parse_module(MODULE).unwrap();
    verify(&m).unwrap();
    assert_eq!(text::print_module(&m), MODULE);
    let c = m.entry();
    let Shape::Array(a) = &c.instr(c.find("c").unwrap()).shape else {
        panic!("array expected")
    };
    assert_eq!(
        a.physical.as_deref(),
        Some(&PhysicalLayout {
            tiles: vec![vec![8, COMBINE_DIMENSION]],
            tail_padding_alignment_in_elements: 2,
            element_size_in_bits: 0,
            memory_space: 0,
            split_configs: vec![
                SplitConfig {
                    dimension: 0,
                    split_indices: vec![4]
                },
                SplitConfig {
                    dimension: 1,
                    split_indices: vec![64, 128]
                },
            ],
        })
    );
    // A layout that says nothing more is one spelling, with no extras.
    let Shape::Array(b) = &c.instr(c.find("b").unwrap()).shape else {
        panic!("array expected")
    };
    assert_eq!(b.physical, None);
}

#[test]
fn the_proto_carries_every_item() {
    let m = text::parse_module(MODULE).unwrap();
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), MODULE);
}
