// A CommonJS require for the page: the broadcaster serves Debian's node modules the key handshake
// needs (/node-modules.js), each defined here as a function of (module, exports, require).
"use strict";
(function () {
  const definitions = new Map();   // id (its path under /usr/share/nodejs, without ".js") → its function
  const packages = new Map();      // package name → its main module's id
  const loaded = new Map();
  window.defineNodeModule = (id, body) => definitions.set(id, body);
  window.defineNodePackage = (name, main) => packages.set(name, main);
  // Debian's elliptic and hash.js require node's assert, as minimalistic-assert: its two calls.
  definitions.set("assert", (module) => {
    module.exports = (ok, message) => { if (!ok) throw new Error(message || "assertion failed"); };
    module.exports.equal = (left, right, message) => module.exports(left == right, message);
  });

  function resolve(from, name) {
    if (!name.startsWith(".")) return packages.get(name) || name;
    const parts = from.split("/").slice(0, -1);
    for (const part of name.replace(/\.js$/, "").split("/")) {
      if (part === "..") parts.pop(); else if (part !== ".") parts.push(part);
    }
    const id = parts.join("/");
    return definitions.has(id) ? id : id + "/index";
  }

  function load(id) {
    if (!loaded.has(id)) {
      const body = definitions.get(id);
      if (!body) throw new Error("the broadcaster did not serve the module " + id);
      const module = { exports: {} };
      loaded.set(id, module);
      body.call(module.exports, module, module.exports, (name) => load(resolve(id, name)));
    }
    return loaded.get(id).exports;
  }

  window.require = (name) => load(resolve("", name));
})();
