import Foundation
import Logging

/// Debian's node-elliptic and the node modules its P-256 needs, as one script for the page's key
/// handshake (Web/spake2.js, required through Web/modules.js): each file of a fixed list under
/// /usr/share/nodejs wrapped in a function, read once at start. Nothing from a request reaches the
/// file system, and none of their code is in this repository: the broadcaster's package recommends them.
enum NodeModules {
    static let root = "/usr/share/nodejs"
    /// The packages the modules require by name, each to its main module.
    static let packages = [
        "bn.js": "bn.js/lib/bn", "hash.js": "hash.js/lib/hash", "inherits": "inherits/inherits_browser",
        "minimalistic-crypto-utils": "minimalistic-crypto-utils/lib/utils",
    ]
    /// Every file they load, as ids (their paths under `root` without ".js"). node-elliptic's
    /// curves, the only part the page uses, need all of its curve/ (index.js loads each kind).
    static let modules = [
        "elliptic/lib/elliptic/curves", "elliptic/lib/elliptic/utils", "elliptic/lib/elliptic/curve/index",
        "elliptic/lib/elliptic/curve/base", "elliptic/lib/elliptic/curve/short", "elliptic/lib/elliptic/curve/mont",
        "elliptic/lib/elliptic/curve/edwards",
        "hash.js/lib/hash", "hash.js/lib/hash/utils", "hash.js/lib/hash/common", "hash.js/lib/hash/sha", "hash.js/lib/hash/ripemd",
        "hash.js/lib/hash/hmac", "hash.js/lib/hash/sha/1", "hash.js/lib/hash/sha/224", "hash.js/lib/hash/sha/256",
        "hash.js/lib/hash/sha/384", "hash.js/lib/hash/sha/512", "hash.js/lib/hash/sha/common",
    ] + packages.values.filter { !$0.hasPrefix("hash.js/") }
    /// node-elliptic 6.5's files come to 180 KB; a file past this is not what the list names.
    static let maxFileBytes = 256 * 1024

    /// The script, or one line saying what is missing (logged once) when a file is: then a private
    /// party's page says so itself, since its require finds nothing.
    static func script(root: String = root, logger: Logger) -> [UInt8] {
        var script = "// Debian's node modules for the page's key handshake (" + root + "), each a function of (module, exports, require).\n"
        for (name, main) in packages.sorted(by: { $0.key < $1.key }) {
            script += "defineNodePackage(\"\(name)\", \"\(main)\");\n"
        }
        for id in modules {
            let path = "\(root)/\(id).js"
            guard let data = FileManager.default.contents(atPath: path), data.count <= maxFileBytes else {
                let missing = "remote control: \(path) is missing: a private party's page cannot prove the key without Debian's node-elliptic package; `broadcaster ctl` still can"
                logger.warning("\(missing)")
                return Array("// \(missing)\n".utf8)
            }
            script += "defineNodeModule(\"\(id)\", function (module, exports, require) {\n\(String(decoding: data, as: UTF8.self))\n});\n"
        }
        return Array(script.utf8)
    }
}
