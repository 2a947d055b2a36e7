import ArgumentParser
import PartyCastWire
#if canImport(Glibc)
import Glibc
#endif

/// `--key`, or PARTYCAST_KEY (which keeps the secret out of `ps`): a private party's shared secret.
public struct PartyKeyOptions: ParsableArguments {
    @Option(name: .customLong("key"), help: ArgumentHelp(
        "A private party's shared secret (at least 8 characters); PARTYCAST_KEY in the environment does the same without showing it to `ps`.",
        valueName: "SECRET"))
    public var secret: String?

    public init() {}

    public static let minimumLength = 8

    public func validate() throws {
        if let secret = resolvedSecret, secret.count < Self.minimumLength {
            throw ValidationError("the party key must be at least \(Self.minimumLength) characters")
        }
    }

    /// The secret's text, for the remote control's `Authorization: Bearer` header.
    public var resolvedSecret: String? {
        if let secret { return secret }
        guard let value = getenv("PARTYCAST_KEY") else { return nil }
        let fromEnvironment = String(cString: value)
        return fromEnvironment.isEmpty ? nil : fromEnvironment
    }

    /// The key, or nil for a public party.
    public var key: PartyKey? { resolvedSecret.map(PartyKey.init(secret:)) }
}
