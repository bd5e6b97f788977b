//! An imported kernel's convention (`--kernel attention=imported:FILE`,
//! its JSON beside the modules it names): layouts that are not a
//! permutation of the attention's dimensions, or name a role a layout does
//! not apply to, are refused naming the field and the file; a layout that
//! does not match the module's shapes names both. The NKI flash-attention
//! fixture of `tools/nki_flash_fixture.py` (the root's
//! `tests/fixtures/kernels/`) is the convention changed.

use crate::scratch;
use hlatc_models::imported_kernel::ImportedKernel;
use std::path::{Path, PathBuf};

/// The root crate's fixture `name` (a path from the repository's root).
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

#[test]
fn layouts_in_a_convention_are_checked_by_name() {
    let dir = scratch("nki_layouts");
    let kernels = fixture("tests/fixtures/kernels");
    for f in ["nki_flash_fwd.hlo", "nki_flash_bwd.hlo"] {
        std::fs::copy(kernels.join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(kernels.join("nki_flash_attention.json")).unwrap();
    let convention: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (pointer, to, says) in [
        (
            "/layout",
            "batch,heads,seq",
            "layout: 'batch,heads,seq': each of batch, heads, seq, head_dim once",
        ),
        (
            "/layout",
            "batch,heads,seq,width",
            "layout: 'batch,heads,seq,width': 'width' is not a dimension",
        ),
        (
            "/forward/layouts/v",
            "batch,heads,heads,seq",
            "forward.layouts: v: 'batch,heads,heads,seq': each of",
        ),
    ] {
        let mut c = convention.clone();
        *c.pointer_mut(pointer).unwrap() = to.into();
        let path = dir.join("kernel.json");
        std::fs::write(&path, c.to_string()).unwrap();
        let err = ImportedKernel::load(&path).unwrap_err().to_string();
        assert!(err.contains(says), "{pointer}={to}: {err}");
        assert!(err.contains("kernel.json"), "{err}");
    }
    let mut c = convention.clone();
    c["forward"]["layouts"]["residual:lse"] = "batch,heads,seq,head_dim".into();
    let path = dir.join("kernel.json");
    std::fs::write(&path, c.to_string()).unwrap();
    let err = ImportedKernel::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("forward.layouts: 'residual:lse' is not a role a layout applies to"),
        "{err}"
    );
    // A layout that does not match the module's shapes names both.
    let mut c = convention;
    c["forward"]["layouts"]["v"] = "batch,heads,head_dim,seq".into();
    std::fs::write(&path, c.to_string()).unwrap();
    let kernel = ImportedKernel::load(&path).unwrap();
    let want = hlatc_models::imported_kernel::attention_operand(
        hlatc_compiler::ElementType::F32,
        [1, 4, 512, 8],
    );
    let err = kernel.check_operands(&want).unwrap_err().to_string();
    assert!(
        err.contains("nki_flash_fwd.hlo: parameter 2 (v of the forward) is f32[1,4,512,8]{3,2,1,0}, where the step passes f32[1,4,8,512]"),
        "{err}"
    );
}
