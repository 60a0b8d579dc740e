/**
 * The daemon's failures, one tagged class per edge: bad flags, TLS material, the bootstrap
 * credentials, the listening socket, the agent's start, and a role's exit code. Each carries a
 * message fit to print before exiting (the box's own errors are the kbox wire's, in core's Runtime).
 */
import { Data } from "effect"

/** A flag is missing, unknown or malformed (exit code 2). */
export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

/** TLS material could not be read, generated or written. */
export class TlsError extends Data.TaggedError("TlsError")<{ readonly message: string }> {}

/** The bootstrap token or the kubeconfig could not be read or written. */
export class BootstrapError extends Data.TaggedError("BootstrapError")<{ readonly message: string }> {}

/** The HTTPS listener could not bind its address. */
export class ListenError extends Data.TaggedError("ListenError")<{ readonly message: string }> {}

/** The agent could not start: no usable credentials, no box, a refused join. */
export class AgentStartError extends Data.TaggedError("AgentStartError")<{ readonly message: string }> {}

/**
 * A role has ended in failure and has already said why on stderr: the process exits with `code`
 * (2 for bad flags, 1 for any other failure; `RoleRuntime.exitCode`).
 */
export class RoleExit extends Data.TaggedError("RoleExit")<{ readonly code: number }> {}

/** Any failure of the daemon. */
export type DaemonError = ConfigError | TlsError | BootstrapError | ListenError | AgentStartError

/** The message of an unknown thrown value. */
export const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))
