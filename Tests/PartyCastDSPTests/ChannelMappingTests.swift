import Foundation
import PartyCastCore
import PartyCastDSP
import Synchronization
import XCTest

/// The channel assignments on interleaved frames, as the output thread applies them in place.
final class ChannelMappingTests: XCTestCase {
    func mapped(_ samples: [Float], channels: Int, _ assignment: ChannelAssignment) -> [Float] {
        var samples = samples
        samples.withUnsafeMutableBufferPointer { assignment.apply(to: $0, channels: channels) }
        return samples
    }

    func testStereoFramesTakeTheirAssignedChannelOnBothOutputs() {
        let frames: [Float] = [0.5, -0.25, 1, 0, -1, 1, 0.125, 0.375]
        XCTAssertEqual(mapped(frames, channels: 2, .stereo), frames)
        XCTAssertEqual(mapped(frames, channels: 2, .left), [0.5, 0.5, 1, 1, -1, -1, 0.125, 0.125])
        XCTAssertEqual(mapped(frames, channels: 2, .right), [-0.25, -0.25, 0, 0, 1, 1, 0.375, 0.375])
        XCTAssertEqual(mapped(frames, channels: 2, .mono), [0.125, 0.125, 0.5, 0.5, 0, 0, 0.25, 0.25])
    }

    /// Left and right are the first two channels of a wider layout; every output gets the assigned one.
    func testWiderLayoutsUseTheFirstTwoChannelsOnEveryOutput() {
        let frames: [Float] = [0.5, -0.5, 0.9, 0.25, 0.75, -0.9]
        XCTAssertEqual(mapped(frames, channels: 3, .left), [0.5, 0.5, 0.5, 0.25, 0.25, 0.25])
        XCTAssertEqual(mapped(frames, channels: 3, .right), [-0.5, -0.5, -0.5, 0.75, 0.75, 0.75])
        XCTAssertEqual(mapped(frames, channels: 3, .mono), [0, 0, 0, 0.5, 0.5, 0.5])
    }

    func testMonoSourcesAndPartialFramesAreLeftAlone() {
        let mono: [Float] = [0.1, 0.2, 0.3]
        for assignment in ChannelAssignment.allCases { XCTAssertEqual(mapped(mono, channels: 1, assignment), mono) }
        // A buffer cut mid-frame: the whole frame is mapped, the stray sample is not touched.
        XCTAssertEqual(mapped([0.5, 0.25, 0.75], channels: 2, .right), [0.25, 0.25, 0.75])
        XCTAssertEqual(mapped([], channels: 2, .mono), [])
    }

    func testTheAssignmentCrossesThreadsAsAnAtomicAndJSONAsItsName() throws {
        let shared = Atomic<ChannelAssignment>(.stereo)
        for assignment in ChannelAssignment.allCases {
            shared.store(assignment, ordering: .relaxed)
            XCTAssertEqual(shared.load(ordering: .relaxed), assignment)
        }
        XCTAssertEqual(String(decoding: try JSONEncoder().encode([ChannelAssignment.left, .mono]), as: UTF8.self), #"["left","mono"]"#)
        XCTAssertEqual(try JSONDecoder().decode([ChannelAssignment].self, from: Data(#"["right","stereo"]"#.utf8)), [.right, .stereo])
        XCTAssertThrowsError(try JSONDecoder().decode([ChannelAssignment].self, from: Data(#"["Left"]"#.utf8)))
        XCTAssertEqual(ChannelAssignment.names, "stereo|left|right|mono")
    }
}
