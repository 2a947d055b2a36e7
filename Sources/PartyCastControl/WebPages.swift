import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// The web page's files (Web/ in the source tree, a SwiftPM resource), read once at start, and for a
/// private party the node modules its key handshake runs on (`NodeModules`).
struct WebPages: Sendable {
    private static let types = ["html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
                                "css": "text/css; charset=utf-8", "yaml": "application/yaml; charset=utf-8",
                                "svg": "image/svg+xml"]
    private static let files = ["index.html", "app.js", "modules.js", "spake2.js", "style.css", "favicon.svg", "openapi.yaml"]
    private static let nodeModules = "node-modules.js"
    /// The page loads nothing from elsewhere and runs no inline script; covers come as blob: URLs.
    private static let policy = "default-src 'self'; img-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'"
    private let contents: [String: (type: String, bytes: [UInt8])]

    /// The routes served: "/" for index.html, "/name" for each file.
    var paths: [String] { ["/"] + (Self.files + [Self.nodeModules]).map { "/" + $0 } }

    static func load(logger: Logger, isPrivate: Bool) -> WebPages {
        var contents: [String: (type: String, bytes: [UInt8])] = [:]
        for file in files {
            let name = (file as NSString).deletingPathExtension, ext = (file as NSString).pathExtension
            guard let url = Bundle.module.url(forResource: name, withExtension: ext, subdirectory: "Web"),
                  let data = try? Data(contentsOf: url) else {
                logger.warning("remote control: the page's \(file) is missing from the installation; the API works without it")
                continue
            }
            contents[file] = (types[ext] ?? "application/octet-stream", Array(data))
        }
        let modules = isPrivate ? NodeModules.script(logger: logger) : Array("// a public party: no key to prove\n".utf8)
        contents[nodeModules] = ("text/javascript; charset=utf-8", modules)
        return WebPages(contents: contents)
    }

    func response(for path: String) throws -> Response {
        let file = path == "/" ? "index.html" : String(path.dropFirst())
        guard let page = contents[file] else { throw APIError(.notFound, "\(file) is not installed") }
        var headers: HTTPFields = [.contentType: page.type, .cacheControl: "no-cache", .contentSecurityPolicy: Self.policy]
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: page.bytes)))
    }
}
