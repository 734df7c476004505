#!/bin/sh
# Install (or remove) Llambda for the current user on Linux: the bundle folder, a menu entry with
# its icon, and the GGUF file association, so a double-click on a .gguf file opens Llambda.
#
#   ./install.sh              copy the bundle this script sits in to ~/.local/share/llambda/app
#   ./install.sh --uninstall  remove what install.sh added (models and conversations stay; see README)
#
# Only touches ~/.local (XDG_DATA_HOME) and ~/.local/bin. Needs no root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
prefix=$data/llambda/app
bin=$HOME/.local/bin

refresh() {
    command -v update-mime-database >/dev/null 2>&1 && update-mime-database "$data/mime" || true
    command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$data/applications" || true
    command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$data/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -rf "$prefix"
    rm -f "$bin/llambda" "$data/applications/llambda.desktop" "$data/mime/packages/llambda-gguf.xml"
    find "$data/icons/hicolor" -name 'llambda.png' -path '*/apps/*' -delete 2>/dev/null || true
    rm -f "$data/icons/hicolor/scalable/apps/llambda.svg"
    refresh
    echo "Llambda removed from $prefix (models and conversations are kept)."
    exit 0
fi

# The bundle: this script lives in Llambda/linux/ (or in packaging/linux/ of a source tree).
bundle=$(cd "$here/.." && pwd)
[ -x "$bundle/Llambda" ] || bundle=$(cd "$here/../.." && pwd)/dist/Llambda
[ -x "$bundle/Llambda" ] || { echo "install.sh: no Llambda bundle found (build it: packaging/build_bundle.sh)" >&2; exit 1; }
icons=$here/icons
[ -d "$icons" ] || icons=$here/../icons

mkdir -p "$prefix" "$bin" "$data/applications" "$data/mime/packages" "$data/icons"
if [ "$bundle" != "$prefix" ]; then
    rm -rf "$prefix"
    cp -a "$bundle" "$prefix"
fi
ln -sf "$prefix/Llambda" "$bin/llambda"
sed -e "s|^Exec=.*|Exec=\"$prefix/Llambda\" %f|" -e "s|^TryExec=.*|TryExec=$prefix/Llambda|" \
    "$here/llambda.desktop" > "$data/applications/llambda.desktop"
cp "$here/llambda-gguf.xml" "$data/mime/packages/llambda-gguf.xml"
cp -R "$icons/hicolor" "$data/icons/"
refresh
command -v xdg-mime >/dev/null 2>&1 && xdg-mime default llambda.desktop application/x-gguf || true
echo "Llambda installed in $prefix; menu entry, icon and .gguf association added."
