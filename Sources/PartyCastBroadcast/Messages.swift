import Foundation
import Logging
import NIOCore
import PartyCastCore
import PartyCastWire

/// Every protocol message the broadcaster writes (Proto/partycast.proto), built in one place.
enum Messages {
    static func welcome(name: String, sessionID: UInt64) -> PCEnvelope {
        var welcome = PCWelcome()
        welcome.protocolVersion = partyCastProtocolVersion
        welcome.broadcasterName = name
        welcome.sessionID = sessionID
        return envelope(.welcome(welcome))
    }

    static func streamFormat(codec: PCCodecKind, _ chunks: ChunkFormat, streamIndex: UInt32, totalFrames: Int?) -> PCEnvelope {
        var format = PCStreamFormat()
        format.codec = codec
        format.sampleRate = UInt32(chunks.format.sampleRate)
        format.channels = UInt32(chunks.format.channels)
        format.framesPerChunk = UInt32(chunks.framesPerChunk)
        format.preSkip = UInt32(chunks.preSkip)
        format.streamIndex = streamIndex
        format.totalFrames = UInt64(totalFrames ?? 0)
        return envelope(.streamFormat(format))
    }

    static func metadata(_ item: PartyItem, streamIndex: UInt32, start: UInt64, songFrame: Int) -> PCEnvelope {
        var metadata = PCMetadata()
        metadata.title = item.title
        metadata.artist = item.tags.artist ?? ""
        metadata.album = item.tags.album ?? ""
        metadata.durationFrames = UInt64(item.durationFrames ?? 0)
        metadata.streamIndex = streamIndex
        metadata.startPosition = start
        metadata.songFrame = UInt64(songFrame)
        return envelope(.metadata(metadata))
    }

    static func audioChunk(sequence: UInt64, position: UInt64, presentationNanoseconds: UInt64, frames: Int, skipFrames: Int,
                           streamIndex: UInt32, payload: [UInt8]) -> PCEnvelope {
        var chunk = PCAudioChunk()
        chunk.sequence = sequence
        chunk.mediaPosition = position
        chunk.presentationNanoseconds = Int64(clamping: presentationNanoseconds)
        chunk.frameCount = UInt32(frames)
        chunk.skipFrames = UInt32(skipFrames)
        chunk.streamIndex = streamIndex
        chunk.payload = Data(payload)
        return envelope(.audioChunk(chunk))
    }

    static func endOfStream(streamIndex: UInt32) -> PCEnvelope {
        var end = PCEndOfStream()
        end.streamIndex = streamIndex
        return envelope(.endOfStream(end))
    }

    static func withdraw(from position: UInt64) -> PCEnvelope {
        var message = PCWithdraw()
        message.fromPosition = position
        return envelope(.withdraw(message))
    }

    /// A Gain from timeline position `position` (0: from the start), reached after `rampFrames`.
    static func gain(_ value: Float, at position: UInt64 = 0, rampFrames: Int = 0) -> PCEnvelope {
        var message = PCGain()
        message.atPosition = position
        message.gain = value
        message.rampFrames = UInt32(clamping: rampFrames)
        return envelope(.gain(message))
    }

    static func partyState(paused: Bool) -> PCEnvelope {
        var message = PCPartyState()
        message.paused = paused
        return envelope(.partyState(message))
    }

    /// What the remote set for one listener; what it did not set stays out (the listener keeps its own).
    static func listenerSettings(latencyOffsetMilliseconds: Int? = nil, channel: ChannelAssignment? = nil) -> PCEnvelope {
        var settings = PCListenerSettings()
        if let latencyOffsetMilliseconds { settings.latencyOffsetMilliseconds = Int32(clamping: latencyOffsetMilliseconds) }
        if let channel { settings.channel = channel.wire }
        return envelope(.listenerSettings(settings))
    }

    static func identify(at position: UInt64) -> PCEnvelope {
        var message = PCIdentify()
        message.atPosition = position
        return envelope(.identify(message))
    }

    static func goodbye(_ reason: String) -> PCEnvelope {
        var goodbye = PCGoodbye()
        goodbye.reason = reason
        return envelope(.goodbye(goodbye))
    }

    private static func envelope(_ body: PCEnvelope.OneOf_Body) -> PCEnvelope {
        var envelope = PCEnvelope()
        envelope.body = body
        return envelope
    }

    /// The envelope framed for the wire.
    static func frame(_ envelope: PCEnvelope) throws(PartyCastError) -> ByteBuffer {
        do throws(WireError) {
            return ByteBuffer(bytes: try WireFraming.encode(envelope))
        } catch {
            throw PartyCastError(.invalidArgument, "cannot frame a message: \(error)")
        }
    }

    /// The envelope framed, or nil with a line in the log: a control message is better left unsent
    /// than sent empty, which a listener would take for a broken stream.
    static func frame(_ envelope: PCEnvelope, logger: Logger) -> ByteBuffer? {
        do throws(PartyCastError) {
            return try frame(envelope)
        } catch {
            logger.error("not sent: \(error.message)")
            return nil
        }
    }
}
