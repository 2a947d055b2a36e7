/// Whether the link lets answers overtake each other, from the order their sequence numbers arrive
/// in. It decides how densely to exchange: where each packet is held on its own (a jittery relay),
/// the more exchanges the more of them meet no queue; where a link keeps order (Wi-Fi, a TCP
/// connection), a packet held up holds up every one behind it, so dense exchanges only queue behind
/// each other and the least delays, which the clock rests on, come rarer.
public struct AnswerOrder: Sendable {
    /// Counts are halved every this many answers, so the verdict follows a link that changes.
    static let horizon = 256
    /// Below this many answers (decayed) there is no verdict: a link is taken to keep order.
    static let leastAnswers = 64
    /// A link whose answers are overtaken this often (per mille) or more lets packets pass each other.
    static let overtakenPerMille = 10

    private var highest: UInt64 = 0
    private var answers = 0
    private var overtaken = 0

    public init() {}

    /// One answer, by the sequence number of its request.
    public mutating func record(sequence: UInt64) {
        if sequence < highest { overtaken += 1 } else { highest = sequence }
        answers += 1
        if answers >= 2 * Self.horizon { (answers, overtaken) = (answers / 2, overtaken / 2) }
    }

    /// True once answers have been seen overtaking others often enough to rule out a link that
    /// keeps order; false on a link that keeps it, and until there is evidence either way.
    public var answersOvertake: Bool {
        answers >= Self.leastAnswers && overtaken * 1000 >= answers * Self.overtakenPerMille
    }
}
