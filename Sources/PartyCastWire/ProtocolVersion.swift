/// The wire protocol this build speaks; peers must speak the same one.
public let partyCastProtocolVersion: UInt32 = 1

/// The Error to send (and show) when a peer speaks another protocol version; nil when they match.
public func protocolMismatch(peerVersion: UInt32, peerRole: String) -> PCEnvelope? {
    guard peerVersion != partyCastProtocolVersion else { return nil }
    let ourRole = peerRole == "listener" ? "broadcaster" : "listener"
    let older = peerVersion < partyCastProtocolVersion ? peerRole : ourRole
    var error = PCError()
    error.code = .protocolVersionMismatch
    error.message = "the \(peerRole) speaks PartyCast protocol \(peerVersion), this \(ourRole) speaks \(partyCastProtocolVersion): upgrade the \(older)"
    var envelope = PCEnvelope()
    envelope.body = .error(error)
    return envelope
}
