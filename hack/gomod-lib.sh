# Sourced by the scripts that build a tool from its Go module (hack/build-clients.sh,
# hack/build-prometheus.sh): the one way they fetch a pinned module. `go install M@V` cannot be
# used (the module proxy here refuses the version list its deprecation check asks for), so the
# module is fetched with `go mod download -json`, its hash checked against the pin, and its
# source copied out of the read-only module cache to be built inside, on its own go.mod/go.sum.
# The caller defines `die` and may set GO.

# fetch_pinned_module MODULE@VERSION SUM DEST PIN_FILE: the module's source, writable, in DEST
# (whose parent is the working directory of the download); dies when the download fails or the
# module's hash is not SUM (PIN_FILE, where SUM is pinned, is named in the message).
fetch_pinned_module() {
  local module="$1" want="$2" dest="$3" pin_file="$4" json src sum
  json="$(cd "$(dirname "$dest")" && GOFLAGS='' "${GO:-go}" mod download -json "$module")" \
    || die "go mod download $module failed: $json"
  src="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
  [[ -n "$src" && -d "$src" ]] || die "go mod download $module printed no module directory"
  [[ "$sum" == "$want" ]] || die "$module hashes to $sum, $pin_file pins $want"
  cp -r "$src" "$dest" && chmod -R u+w "$dest"
}
