# A headless browser for the dashboard's test (crates/contextfold-serve/tests/it/ui.rs):
# Debian's `chromium` package, and `playwright-core` from npm to drive it (the library only:
# playwright-core has no dependency and downloads no browser).
#
# Exports CONTEXTFOLD_CHROMIUM (the browser's binary) and CONTEXTFOLD_PLAYWRIGHT_NODE_MODULES
# (a node_modules holding `playwright-core`). The library is installed once under
# ~/.cache/contextfold/browser/, in a folder named after its pinned version, so a version
# change installs afresh; a variable already set is kept as it is.

BROWSER_PLAYWRIGHT_VERSION="1.65.2"
BROWSER_DIR="${HOME}/.cache/contextfold/browser/playwright-core-$BROWSER_PLAYWRIGHT_VERSION"

if [ -z "${CONTEXTFOLD_CHROMIUM:-}" ]; then
  if [ ! -x /usr/bin/chromium ]; then
    echo "installing chromium"
    if [ "$(id -u)" = 0 ]; then BROWSER_SUDO=""; else BROWSER_SUDO="sudo"; fi
    $BROWSER_SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $BROWSER_SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
  fi
  export CONTEXTFOLD_CHROMIUM=/usr/bin/chromium
fi

if [ -z "${CONTEXTFOLD_PLAYWRIGHT_NODE_MODULES:-}" ]; then
  if [ ! -f "$BROWSER_DIR/node_modules/playwright-core/package.json" ]; then
    echo "installing playwright-core $BROWSER_PLAYWRIGHT_VERSION"
    rm -rf "$BROWSER_DIR"
    mkdir -p "$BROWSER_DIR"
    (cd "$BROWSER_DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --ignore-scripts --no-save \
      --no-package-lock --no-audit --no-fund --loglevel=error "playwright-core@$BROWSER_PLAYWRIGHT_VERSION" >/dev/null)
  fi
  export CONTEXTFOLD_PLAYWRIGHT_NODE_MODULES="$BROWSER_DIR/node_modules"
fi
