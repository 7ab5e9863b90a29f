# The CLI's hardening tests run the binary under a pseudo-terminal (`script`, Debian package
# bsdutils) to see its progress bar, and read a store on a read-only tmpfs mounted in a
# private namespace (`unshare`, util-linux). Both are essential packages on Debian; this
# installs them only where they are missing. Exports nothing.
missing=()
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
command -v unshare >/dev/null 2>&1 || missing+=(util-linux)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing ${missing[*]}"
  apt-get update -qq && apt-get install -y -qq "${missing[@]}"
fi
