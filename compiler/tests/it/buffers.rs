//! Buffer shapes (`b(f32[16])`): an array held as a buffer that custom
//! calls pin, update in place and unpin. Kept through text and proto, and
//! verified as XLA's verifier does (each rule measured through PJRT on the
//! XLA test modules that hold buffers; the refusals are golden files,
//! `compiler/tests/filetests/{parse,verify}/buffer_*.hlo`).

use hlatc_compiler::{formats::proto, formats::text, verify, Module, Shape};

fn module(body: &str) -> Result<Module, String> {
    let src = format!("HloModule m\n\nENTRY e {{\n  p = f32[4] parameter(0)\n{body}\n}}\n");
    let m = text::parse_module(&src).map_err(|e| e.to_string())?;
    verify(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

const PIN: &str = "  b = b(f32[4]) custom-call(p), custom_call_target=\"Pin\", output_to_operand_aliasing={{}: (0, {})}";

#[test]
fn a_buffer_is_kept_through_text_and_proto() {
    let m = module(&format!(
        "{PIN}\n  t = (b(f32[4]), f32[4]) tuple(b, p)\n  u = b(f32[4]) get-tuple-element(t), index=0\n  ROOT v = f32[4] custom-call(u), custom_call_target=\"Unpin\", output_to_operand_aliasing={{{{}}: (0, {{}})}}"
    ))
    .unwrap();
    let e = m.entry();
    let b = &e.instr(e.find("b").unwrap()).shape;
    assert!(matches!(b, Shape::Buffer(a) if a.dims == [4]));
    assert_eq!(b.to_string(), "b(f32[4]{0})");
    assert!(text::print_module(&m).contains("t = (b(f32[4]{0}), f32[4]{0}) tuple(b, p)"));
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), text::print_module(&m));
}
