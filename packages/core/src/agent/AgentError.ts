/**
 * The failures of the agent's ports (volumes, host ports), as tagged errors. Runtime failures are
 * the Runtime port's own (`Runtime.RuntimeError`); API failures are `ApiError`.
 */
import { Data } from "effect"

/** A volume could not be set up or removed (a missing hostPath, a write that failed). */
export class VolumeError extends Data.TaggedError("VolumeError")<{ readonly volume: string; readonly message: string }> {}

/** No free host port could be found. */
export class HostPortError extends Data.TaggedError("HostPortError")<{ readonly message: string }> {}
