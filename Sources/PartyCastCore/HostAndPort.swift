/// A peer's address as people type it: HOST, HOST:PORT, [IPv6] or [IPv6]:PORT. An IPv6 address
/// without brackets is all host: its last group could not be told from a port.
public struct HostAndPort: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// The message of what it throws says what is wrong with `text`, not which option it came from.
    public init(parsing text: Substring, defaultPort: Int) throws(PartyCastError) {
        var host = text, portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw PartyCastError(.invalidArgument, "\(text): no ] after the IPv6 address")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { throw PartyCastError(.invalidArgument, "\(text): a port follows ]: as in [::1]:\(defaultPort)") }
                portText = rest.dropFirst()
            }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        var port = defaultPort
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw PartyCastError(.invalidArgument, "\(text): the port must be 1…65535")
            }
            port = number
        }
        guard !host.isEmpty, !host.utf8.contains(0) else { throw PartyCastError(.invalidArgument, "\(text): no host") }
        self.host = String(host)
        self.port = port
    }

    /// HOST:PORT, an IPv6 host in brackets: an HTTP Host header's form, and what the log shows.
    public var description: String { authority(omittingPort: nil) }

    /// The same without the port where it is `defaultPort` (a Host header leaves out HTTP's 80).
    public func authority(omittingPort defaultPort: Int?) -> String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return port == defaultPort ? bracketed : "\(bracketed):\(port)"
    }
}
