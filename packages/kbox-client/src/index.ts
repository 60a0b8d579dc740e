/**
 * @koder/fleet-kbox-client: core's Runtime port spoken to a kbox daemon (`koder-fleet box` or a
 * real kbox) over a Unix socket (DESIGN §8). README.md is the written kbox API contract.
 */
export * as KboxClient from "./KboxClient.js"
export * as KboxWire from "./KboxWire.js"
export * as KboxStreams from "./KboxStreams.js"
