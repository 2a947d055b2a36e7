// SPAKE2 (RFC 9382, suite SPAKE2-P256-SHA256-HKDF-HMAC): the page's side of the control port's key
// handshake, the same protocol as Sources/PartyCastControl/Spake2.swift (its comments say why).
// P-256, SHA-256 and HMAC come from Debian's node-elliptic, node-hash.js and node-bn.js, which the
// broadcaster serves (/node-modules.js, required through modules.js); node runs this file in the tests.
"use strict";
(function (exports, require) {
  const fixedPoints = {
    a: "02886e2f97ace46e55ba9dd7242579f2993b64e16ef3dcab95afd497333d8fa12f",  // M
    b: "03d8bbd6c639c62937b04d997f38c3770719c629d7014d49a24b4f98baa1292b49",  // N
  };
  const utf8 = (text) => Array.from(new TextEncoder().encode(text));
  const identities = [utf8("partycast remote"), utf8("partycast broadcaster")];
  const associatedData = utf8("PartyCast remote control");
  const passwordInfo = utf8("PartyCast remote control SPAKE2 w");

  // Loaded at the first handshake: a public party's page never needs them.
  let libraries = null;
  function load() {
    if (!libraries) {
      const p256 = require("elliptic/lib/elliptic/curves").p256;
      libraries = { curve: p256.curve, g: p256.g, order: p256.n, hash: require("hash.js"), BN: require("bn.js") };
    }
    return libraries;
  }

  const sha256 = (bytes) => load().hash.sha256().update(bytes).digest();
  const hmac = (key, message) => load().hash.hmac(load().hash.sha256, key).update(message).digest();

  // HKDF-SHA256 (RFC 5869) without salt: extract, then as many expand blocks as `length` needs.
  function hkdf(secret, info, length) {
    const key = hmac(new Array(32).fill(0), secret);
    let block = [], output = [];
    for (let counter = 1; output.length < length; counter++) {
      block = hmac(key, block.concat(info, [counter]));
      output = output.concat(block);
    }
    return output.slice(0, length);
  }

  // w = HKDF-SHA256(key, 48 bytes) mod the group's order, 32 bytes big-endian.
  function password(key) {
    const { BN, order } = load();
    return new BN(hkdf(utf8(key), passwordInfo, 48)).umod(order).toArray("be", 32);
  }

  // A share from the peer: an uncompressed point of the curve, coordinates below p, not the identity.
  function point(bytes) {
    const { curve, BN } = load();
    if (!Array.isArray(bytes) || bytes.length !== 65 || bytes[0] !== 4) return null;
    if (new BN(bytes.slice(1, 33)).cmp(curve.p) >= 0 || new BN(bytes.slice(33)).cmp(curve.p) >= 0) return null;
    const decoded = curve.decodePoint(bytes);
    return curve.validate(decoded) && !decoded.isInfinity() ? decoded : null;
  }

  // Each part after its length, 8 bytes little-endian.
  function transcript(parts) {
    return parts.flatMap((part) => {
      const length = [];
      for (let i = 0, n = part.length; i < 8; i++, n = Math.floor(n / 256)) length.push(n % 256);
      return length.concat(part);
    });
  }

  // One side of one run: role "a" (the remote) or "b"; w and the secret scalar as big-endian bytes.
  function party(role, w, scalar) {
    const { curve, g, BN } = load();
    const x = new BN(scalar), wNumber = new BN(w);
    const own = curve.decodePoint(fixedPoints[role], "hex"), other = curve.decodePoint(fixedPoints[role === "a" ? "b" : "a"], "hex");
    const share = g.mul(x).add(own.mul(wNumber)).encode("array", false);
    return {
      share,
      // The run's confirmations, or null when the peer's share is no usable point (RFC 9382's aborts).
      finish(peerShare, names = identities, aad = associatedData) {
        const peer = point(peerShare);
        if (!peer) return null;
        const k = peer.add(other.mul(wNumber).neg()).mul(x);
        if (k.isInfinity()) return null;
        const [shareA, shareB] = role === "a" ? [share, peerShare] : [peerShare, share];
        const tt = transcript([names[0], names[1], shareA, shareB, k.encode("array", false), w]);
        const keys = hkdf(sha256(tt).slice(16), utf8("ConfirmationKeys").concat(aad), 32);
        const [a, b] = [hmac(keys.slice(0, 16), tt), hmac(keys.slice(16), tt)];
        return role === "a" ? { own: a, expected: b } : { own: b, expected: a };
      },
    };
  }

  // A fresh run of the remote's side for `key`: a scalar from 48 random bytes mod the order (bias
  // 2^-128), never zero.
  function remote(key) {
    const { BN, order } = load();
    let scalar;
    do {
      scalar = new BN(Array.from(globalThis.crypto.getRandomValues(new Uint8Array(48)))).umod(order);
    } while (scalar.isZero());
    return party("a", password(key), scalar.toArray("be", 32));
  }

  // Equal bytes, compared without stopping at the first difference.
  function same(left, right) {
    if (!Array.isArray(left) || !Array.isArray(right) || left.length !== right.length) return false;
    let difference = 0;
    for (let i = 0; i < left.length; i++) difference |= left[i] ^ right[i];
    return difference === 0;
  }

  Object.assign(exports, { load, party, password, remote, same });
})(typeof module === "object" ? module.exports : (window.spake2 = {}), typeof module === "object" ? require : window.require);
