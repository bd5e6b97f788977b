//! Host memory: sizes saturate instead of wrapping, and a run larger than
//! memory could hold is refused before it is tried.

use hlatc_compiler::{ArrayShape, ElementType, Shape};
use hlatc_runtime::host_memory::ensure_fits;

#[test]
fn sizes_saturate_and_huge_runs_are_refused() {
    let big = Shape::Array(ArrayShape::new(ElementType::F32, vec![1 << 40, 1 << 40]));
    assert_eq!(big.byte_size(), u64::MAX);
    let small = Shape::Array(ArrayShape::new(ElementType::F64, vec![3, 5]));
    assert_eq!(Shape::Tuple(vec![small.clone(), small]).byte_size(), 240);
    let e = ensure_fits("running m", 1 << 60).unwrap_err().to_string();
    assert!(
        e.starts_with("running m needs 1152921504.6 GB of host memory"),
        "{e}"
    );
    assert!(ensure_fits("running m", 1 << 10).is_ok());
}
