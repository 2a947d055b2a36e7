import ArgumentParser
import PartyCastCore
import PartyCastWire
#if canImport(Glibc)
import Glibc
#endif

/// `--key`, `--key-file` or PARTYCAST_KEY (the last two keep the secret out of `ps`): a private
/// party's shared secret.
public struct PartyKeyOptions: ParsableArguments {
    @Option(name: .customLong("key"), help: ArgumentHelp(
        "A private party's shared secret (at least 8 characters); PARTYCAST_KEY in the environment does the same without showing it to `ps`.",
        valueName: "SECRET"))
    public var secret: String?

    @Option(name: .customLong("key-file"), help: ArgumentHelp(
        "Read the party's secret from FILE (a trailing newline is not part of it; an empty file means a public party), e.g. $CREDENTIALS_DIRECTORY/partycast-key under systemd.",
        valueName: "FILE"))
    public var secretFile: String?

    public init() {}

    public static let minimumLength = 8
    /// A key file longer than this is not a key (a wrong path, a music file).
    static let fileSizeLimit = 4096

    public func validate() throws {
        if secret != nil && secretFile != nil { throw ValidationError("give --key or --key-file, not both") }
        if let secret = try resolvedSecret, secret.count < Self.minimumLength {
            throw ValidationError("the party key must be at least \(Self.minimumLength) characters")
        }
    }

    /// The secret's text, nil for a public party.
    public var resolvedSecret: String? {
        get throws {
            if let secret { return secret }
            if let secretFile { return try Self.readSecret(from: secretFile) }
            guard let value = getenv("PARTYCAST_KEY") else { return nil }
            let fromEnvironment = String(cString: value)
            return fromEnvironment.isEmpty ? nil : fromEnvironment
        }
    }

    /// The key, or nil for a public party.
    public var key: PartyKey? {
        get throws { try resolvedSecret.map(PartyKey.init(secret:)) }
    }

    /// The file's text without its trailing line break; nil when nothing else is in it.
    static func readSecret(from path: String) throws -> String? {
        let fd: Int32
        do { fd = try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC) } } catch {
            throw ValidationError("--key-file \(path): cannot open (\(error))")
        }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: fileSizeLimit + 1)
        var count = 0
        while count < bytes.count {
            let read: Int
            do {
                read = try bytes.withUnsafeMutableBytes { buffer throws(SystemCallError) in
                    try systemCall("read") { Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count) }
                }
            } catch { throw ValidationError("--key-file \(path): cannot read (\(error))") }
            if read == 0 { break }
            count += read
        }
        guard count <= fileSizeLimit else { throw ValidationError("--key-file \(path): longer than \(fileSizeLimit) bytes, not a key") }
        var text = bytes[..<count]
        while let last = text.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { text = text.dropLast() }
        guard let secret = String(validating: text, as: UTF8.self) else {
            throw ValidationError("--key-file \(path): not UTF-8 text")
        }
        return secret.isEmpty ? nil : secret
    }
}
