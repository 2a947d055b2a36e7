// Runs the page's own SPAKE2 (Sources/PartyCastControl/Web/spake2.js) under node for Spake2PageTests:
// argv[2] is the page's file, argv[3] a JSON list of runs, each {role, w or key, scalar, peerShare,
// and optionally identities [A, B] and aad}, bytes as hex. Prints, per run, {share, own, expected}
// in hex, or {share, refused: true} when the page refuses the peer's share.
"use strict";
const spake2 = require(process.argv[2]);
const bytes = (hex) => Array.from(Buffer.from(hex, "hex"));
const hex = (array) => Buffer.from(array).toString("hex");
const results = JSON.parse(process.argv[3]).map((run) => {
  const w = run.key === undefined ? bytes(run.w) : spake2.password(run.key);
  const party = spake2.party(run.role, w, bytes(run.scalar));
  const finished = run.identities
    ? party.finish(bytes(run.peerShare), run.identities.map((name) => Array.from(Buffer.from(name))), bytes(run.aad))
    : party.finish(bytes(run.peerShare));
  return finished ? { share: hex(party.share), own: hex(finished.own), expected: hex(finished.expected) } : { share: hex(party.share), refused: true };
});
console.log(JSON.stringify(results));
