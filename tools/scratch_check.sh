# What tools/add_op_check.sh and tools/add_kernel_check.sh share: a
# scratch workspace of some crates, a made-up variant planted in an enum
# there, a type-check, and the non-exhaustive matches it finds counted by
# the place that must now handle the variant. Sourced, not run.

# Copies the tracked files of the crates named (and the workspace's
# Cargo.toml and Cargo.lock) into $1/ws, a workspace of those crates alone.
# Sets `ws`.
scratch_workspace() {
    local scratch="$1"
    shift
    local root
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    ws="$scratch/ws"
    rm -rf "$ws"
    mkdir -p "$ws"
    (cd "$root" && git ls-files -z -- Cargo.toml Cargo.lock "$@") |
        (cd "$root" && xargs -0 cp --parents -t "$ws")
    local members
    members="$(printf '"%s", ' "$@")"
    printf '[workspace]\nmembers = [%s]\nresolver = "2"\n' "${members%, }" > "$ws/Cargo.toml"
    sed -n '/^\[workspace.package\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
    sed -n '/^\[workspace.dependencies\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
}

# Adds `    /// A made-up ...\n    MadeUp...,` as the first variant of each
# enum whose head (`pub enum Op {`) is given, in file $1; $2 is the
# variant as written (`MadeUp { width: i64 }`).
plant_variant() {
    local file="$1" variant="$2"
    shift 2
    python3 - "$file" "$variant" "$@" <<'EOF'
import sys
path, variant, heads = sys.argv[1], sys.argv[2], sys.argv[3:]
s = open(path).read()
for head in heads:
    i = s.index(head)
    j = s.index("\n", i)
    s = s[: j + 1] + f"    /// A made-up variant.\n    {variant},\n" + s[j + 1 :]
open(path, "w").write(s)
EOF
}

# Prints, for each `FILE:what` of $3..., the non-exhaustive matches
# (E0004) the check log $1 finds in crate directory $2's FILE, then those
# elsewhere and in all. Returns 1 if a place has none, one is elsewhere,
# or the log has another error (a scratch copy that does not build for
# another reason proves nothing).
count_places() {
    local log="$1" crate="$2"
    shift 2
    local status=0 place file n others
    printf '%-44s %s\n' "place" "errors"
    local excluded=()
    for place in "$@"; do
        file="${place%%:*}"
        excluded+=(-e "^$crate/src/$file")
        n="$(grep -c "^$crate/src/$file.*error\[E0004\]" "$log" || true)"
        printf '%-44s %s\n' "${place#*:}" "$n"
        if [ "$n" -eq 0 ]; then status=1; fi
    done
    others="$( (grep "error\[E0004\]" "$log" || true) | (grep -v "${excluded[@]}" || true) | wc -l)"
    printf '%-44s %s\n' "elsewhere" "$others"
    printf '%-44s %s\n' "in all" "$(grep -c 'error\[E0004\]' "$log" || true)"
    if [ "$others" -ne 0 ]; then status=1; fi
    if grep "error\[" "$log" | grep -qv "E0004"; then
        grep "error\[" "$log" | grep -v "E0004" >&2 || true
        echo "error: the scratch copy fails for another reason than the matches" >&2
        status=1
    fi
    return "$status"
}
