#!/usr/bin/env bash
# Refresh the chat page's vendored Markdown libraries (no build step: their own ES module
# builds, as npm ships them) and their licences: marked renders, DOMPurify sanitises.
# Usage: scripts/vendor-chat-page.sh   (needs npm; run from the repository root)
set -euo pipefail
MARKED=18.2.1
DOMPURIFY=3.5.0
out=src/hookmesh/services/agui/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
npm install --prefix "$work" --no-save --no-audit --no-fund "marked@$MARKED" "dompurify@$DOMPURIFY" >/dev/null
mods=$work/node_modules
mkdir -p "$out"
# The source maps are not vendored: drop the comments that name them.
sed '/^\/\/# sourceMappingURL=/d' "$mods/marked/lib/marked.esm.js" > "$out/marked.esm.js"
sed '/^\/\/# sourceMappingURL=/d' "$mods/dompurify/dist/purify.es.mjs" > "$out/purify.es.mjs"
cp "$mods/marked/LICENSE" "$out/marked.LICENSE"
cp "$mods/dompurify/LICENSE" "$out/dompurify.LICENSE"
cp "$mods/dompurify/LICENSE-MPL" "$out/dompurify.LICENSE-MPL"
cat > "$out/README.md" <<NOTE
# Vendored libraries of the chat page

Copied by \`scripts/vendor-chat-page.sh\` from npm, unmodified but for their source-map comments:

| file | package | licence |
|---|---|---|
| \`marked.esm.js\` | [marked](https://github.com/markedjs/marked) $MARKED (\`lib/marked.esm.js\`) | MIT, \`marked.LICENSE\` |
| \`purify.es.mjs\` | [DOMPurify](https://github.com/cure53/DOMPurify) $DOMPURIFY (\`dist/purify.es.mjs\`) | Apache-2.0 or MPL-2.0, \`dompurify.LICENSE\`, \`dompurify.LICENSE-MPL\` |

The page renders an answer's Markdown with marked and inserts only what DOMPurify keeps.
NOTE
echo "vendored marked $MARKED and DOMPurify $DOMPURIFY into $out"
