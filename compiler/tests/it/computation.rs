//! The computation's operand and user lists: every way of rewiring keeps
//! the two in step, uses counted once per operand slot.

use hlatc_compiler::ir::op::BinaryOp;
use hlatc_compiler::{Computation, ElementType, InstrId, Instruction, Op, Shape};

fn f32s() -> Shape {
    Shape::array(ElementType::F32, [2])
}

fn param(c: &mut Computation, n: i64) -> InstrId {
    c.add(
        Instruction::new(format!("p{n}"), f32s(), Op::Parameter(n)),
        &[],
    )
}

fn add(c: &mut Computation, name: &str, a: InstrId, b: InstrId) -> InstrId {
    c.add(
        Instruction::new(name, f32s(), Op::Binary(BinaryOp::Add)),
        &[a, b],
    )
}

/// Every user list holds one entry per operand slot that reads it.
fn assert_consistent(c: &Computation) {
    for id in c.ids() {
        for u in c.users(id) {
            let slots = c.operand_ids(u).iter().filter(|&&o| o == id).count();
            assert!(slots > 0, "{u:?} listed as a user of {id:?}");
        }
        for &o in c.operand_ids(id) {
            assert!(c.users(o).contains(&id), "{id:?} reads {o:?} unlisted");
        }
    }
}

#[test]
fn operands_keep_their_order_and_users_count_each_use() {
    let mut c = Computation::new("c");
    let p = param(&mut c, 0);
    let q = param(&mut c, 1);
    let s = add(&mut c, "s", q, p);
    let d = add(&mut c, "d", p, p);
    assert_eq!(c.operand_ids(s), &[q, p]);
    assert_eq!(c.operands(d), vec![p, p]);
    assert!(c.reads_exactly(s, &[q, p]));
    assert!(!c.reads_exactly(s, &[p, q]));
    assert!(!c.reads_exactly(s, &[q]));
    // Distinct users in id order; `d` reads `p` twice but is listed once.
    assert_eq!(c.users(p), vec![s, d]);
    assert_eq!(c.sole_user(q), Some(s));
    assert_eq!(c.sole_user(p), None);
    assert!(!c.has_users(d));
    assert_consistent(&c);
}

#[test]
fn rewiring_moves_uses_between_lists() {
    let mut c = Computation::new("c");
    let p = param(&mut c, 0);
    let q = param(&mut c, 1);
    let d = add(&mut c, "d", p, p);
    let s = add(&mut c, "s", p, q);
    c.set_root(d);

    // Both of `d`'s reads of `p` move; `s` is left alone.
    c.replace_uses_in(d, p, q);
    assert_eq!(c.operand_ids(d), &[q, q]);
    assert_eq!(c.users(p), vec![s]);
    assert_eq!(c.users(q), vec![d, s]);
    assert_consistent(&c);

    // Every use of `q`, and the root when it names the replaced one.
    c.replace_all_uses(q, p);
    assert_eq!(c.operand_ids(d), &[p, p]);
    assert_eq!(c.operand_ids(s), &[p, p]);
    assert!(!c.has_users(q));
    c.replace_all_uses(d, s);
    assert_eq!(c.root(), Some(s));
    assert_consistent(&c);

    // A new list hands back the old one, whose instructions lose a use.
    let old = c.set_operands(s, &[q, p]);
    assert_eq!(old.as_slice(), &[p, p]);
    assert_eq!(c.users(q), vec![s]);
    assert_eq!(c.users(p), vec![d, s]);
    assert_consistent(&c);
}

#[test]
fn removing_drops_the_uses_both_ways() {
    let mut c = Computation::new("c");
    let p = param(&mut c, 0);
    let q = param(&mut c, 1);
    let s = add(&mut c, "s", p, q);
    let t = add(&mut c, "t", s, s);
    c.set_root(t);
    assert!(c.remove(t).is_some());
    assert_eq!(c.root(), None);
    assert!(!c.has_users(s));
    assert!(c.remove(t).is_none());
    // Removing something still read leaves its reader without that operand
    // (the verifier then reports the arity), never pointing at a removed id.
    let u = add(&mut c, "u", s, q);
    c.remove(s);
    assert_eq!(c.operand_ids(u), &[q]);
    assert_eq!(c.users(p), Vec::<InstrId>::new());
    assert_consistent(&c);
}

#[test]
fn post_order_puts_operands_first_and_lists_cycles_last() {
    let mut c = Computation::new("c");
    let p = param(&mut c, 0);
    let q = param(&mut c, 1);
    let s = add(&mut c, "s", q, p);
    let t = add(&mut c, "t", s, p);
    c.set_root(t);
    assert_eq!(c.post_order(), vec![q, p, s, t]);
    // `a` and `b` read each other: reached from no sink, both are still
    // listed, so the verifier can report the cycle.
    let a = add(&mut c, "a", p, p);
    let b = add(&mut c, "b", a, a);
    c.replace_uses_in(a, p, b);
    let order = c.post_order();
    assert_eq!(order.len(), c.len());
    assert_eq!(&order[order.len() - 2..], &[a, b]);
}

/// Control dependencies order instructions that share no value: the post
/// order puts each predecessor first, removing an instruction hands its
/// predecessors to its successors, and a cycle through them is refused.
#[test]
fn control_dependencies_order_without_values_and_survive_removal() {
    let mut c = Computation::new("c");
    let p0 = param(&mut c, 0);
    let p1 = param(&mut c, 1);
    let a = add(&mut c, "a", p0, p0);
    let b = add(&mut c, "b", p1, p1);
    let mid = add(&mut c, "mid", p1, p1);
    let root = add(&mut c, "root", a, b);
    c.set_root(root);
    // b before mid before a: nothing but the dependencies says so.
    c.add_control_dependency(b, mid);
    c.add_control_dependency(mid, a);
    c.add_control_dependency(mid, a);
    assert_eq!(c.control_predecessors(a), &[mid], "added once");
    let order = c.post_order();
    let at = |id| order.iter().position(|&x| x == id).unwrap();
    assert!(at(b) < at(mid) && at(mid) < at(a), "{order:?}");
    assert_eq!(order.len(), 6, "mid has no user but is reached through a");

    // Removing mid leaves b before a.
    c.remove(mid);
    assert_eq!(c.control_predecessors(a), &[b]);
    assert_eq!(c.control_successors(b), &[a]);
    assert!(c.control_predecessors(mid).is_empty());
    let order = c.post_order();
    assert!(
        order.iter().position(|&x| x == b) < order.iter().position(|&x| x == a),
        "{order:?}"
    );

    // A control edge against the data flow makes a cycle.
    c.add_control_dependency(root, a);
    let mut m = hlatc_compiler::Module::new("m", c);
    let e = hlatc_compiler::verify(&m).unwrap_err().to_string();
    assert!(e.contains("instructions form a cycle"), "{e}");
    let c = &mut m.computations[0];
    c.remove(a);
    assert_consistent(c);
}
