# Reads `go test -v` output (of one or more test binaries) and prints, for
# the user U (variable), "PASS SKIP FAIL SECONDS" on the first line and then
# one line per failure: "TestName: its last logged line". Used by
# .ci/matrix-lib.sh.
#
# Only leaves count (a test with subtests is judged by them), except a
# parent that failed while none of its subtests did (a t.Fatal before or
# after them). A leaf TestX/<user>/... belongs to that user; one without a
# user component belongs to U when U ran the binary (root or self).
function owner(name,   p) {
  split(name, p, "/")
  if (p[2] == "root" || p[2] == "nobody" || p[2] == "self") return p[2]
  return (U == "root" || U == "self") ? U : ""
}
# -v output streams each test's log lines after its "=== RUN" (or "=== CONT"
# / "=== NAME" when tests interleave); the "--- FAIL" lines come later. A
# test's last "file.go:N:" line is kept as its message (t.Fatal is last);
# "file.sh:N:" is a check of a guest's script written in the same form.
/^=== (RUN|CONT|NAME) / { cur = $3; next }
/^ *--- (PASS|FAIL|SKIP): / {
  st = $2; sub(":", "", st)
  name = $3
  dur = $4; gsub(/[()s]/, "", dur)
  n++; names[n] = name; status[name] = st
  split(name, p, "/")
  if (p[3] == "" && (p[2] == U)) secs += dur
  next
}
cur != "" && /^ +[A-Za-z0-9_]+\.(go|sh):[0-9]+: / {
  line = $0; sub(/^ +/, "", line)
  msg[cur] = substr(line, 1, 220)
  next
}
END {
  for (i = 1; i <= n; i++) {
    a = names[i]
    for (j = 1; j <= n; j++) {
      if (index(names[j], a "/") == 1) { parent[a] = 1; if (status[names[j]] == "FAIL") failedChild[a] = 1 }
    }
  }
  for (i = 1; i <= n; i++) {
    a = names[i]
    if (owner(a) != U) continue
    if (a in parent && !(status[a] == "FAIL" && !(a in failedChild))) continue
    if (status[a] == "PASS") np++
    else if (status[a] == "SKIP") ns++
    else { nf++; f[nf] = a ": " msg[a] }
  }
  printf "%d %d %d %.0f\n", np, ns, nf, secs
  for (i = 1; i <= nf; i++) print f[i]
}
