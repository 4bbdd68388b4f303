/* `hettrain export`: a trained checkpoint written in another tool's layout (Hugging Face
 * GPT-2). Returns the exit code; bad input exits 2 from inside. */
#ifndef HT_CLI_EXPORT_H
#define HT_CLI_EXPORT_H

int ht_export_cli(int argc, char **argv);

#endif
