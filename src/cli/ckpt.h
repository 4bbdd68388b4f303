/* `hettrain ckpt merge IN OUT` and `hettrain ckpt split IN OUT --shards K`: a checkpoint as one
 * file or as a sharded set (io/safetensors.h), converted either way. Returns the exit code. */
#ifndef HT_CLI_CKPT_H
#define HT_CLI_CKPT_H

int ht_ckpt_cli(int argc, char **argv);

#endif
