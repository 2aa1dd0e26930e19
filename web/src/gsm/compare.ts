/** Π3's comparison (seed 004 Fig. 5–6) on the device: placeholder until the OT receiver and evaluator land. */
import type { GsmDevice, Pi3State } from "./device.js";
import { ProtocolError } from "./params.js";

export function pi3Request(dev: GsmDevice, challenge: Uint8Array): { request: Uint8Array; state: Pi3State } {
  dev.pi3Inputs(challenge);
  throw new ProtocolError("Π3 is not implemented in the browser device yet");
}
