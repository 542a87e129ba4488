"""The simulated prefix cache: full blocks of prompt tokens, hashed in a chain as vLLM does.

A request's prompt is cut into block_size-token blocks; each block's key is the hash of the
previous key and its tokens, so a block only matches after the same whole prefix. Blocks a
finished prefill computed are kept (least recently used dropped first, at most the KV cache's
block count); the next request sharing them skips their prefill: a lower TTFT, and hits in
/metrics (vllm:prefix_cache_hits). POST /reset_prefix_cache (VLLM_SERVER_DEV_MODE=1) empties it.
A chat request's units are its messages as JSON words: a conversation's next turn, which carries
the earlier turns, finds their blocks (a multi-turn conversation hits on its history).
"""

import collections
import hashlib


def block_keys(tokens, block_size, salt=None):
    """The chained keys of a token list's full blocks (the partial last block is never cached).
    A request's cache_salt is hashed into its first block, as vLLM does, so every later block
    differs too: a prompt only matches blocks computed under the same salt."""
    keys = []
    parent = b"salt\x1f" + salt.encode("utf-8") if salt else b""
    for start in range(0, len(tokens) - len(tokens) % block_size, block_size):
        digest = hashlib.sha256(parent)
        digest.update("\x1f".join(str(t) for t in tokens[start : start + block_size]).encode("utf-8"))
        parent = digest.digest()
        keys.append(parent)
    return keys


def check_salt(salt):
    """vLLM's validate_cache_salt: None, or its one-line error (a 400)."""
    if salt is None:
        return None
    if not isinstance(salt, str) or not salt:
        return "Parameter 'cache_salt' must be a non-empty string if provided."
    if len(salt) > 128 or any(c in salt for c in "@/\\\x00"):
        return "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL."
    return None


def prompt_units(prompt):
    """A prompt as the units the simulator counts as tokens: token ids as given, else words."""
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return prompt_units(prompt[0])
    return str(prompt or "").split()


class PrefixCache(object):
    def __init__(self, block_size, capacity_blocks):
        self.block_size = max(1, int(block_size))
        self.capacity = max(1, int(capacity_blocks))
        self.blocks = collections.OrderedDict()

    def match(self, keys):
        """How many leading blocks of keys are cached (each touched: recently used)."""
        n = 0
        for key in keys:
            if key not in self.blocks:
                break
            self.blocks.move_to_end(key)
            n += 1
        return n

    def insert(self, keys):
        for key in keys:
            self.blocks[key] = True
            self.blocks.move_to_end(key)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)

    def reset(self):
        self.blocks.clear()
