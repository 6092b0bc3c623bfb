/*
 * launcher/prep/prep.h - `stork prep`: text files to byte-level llm.c token shards.
 *
 * Token t < 256 is the byte t; PREP_EOT (256) precedes every document (every
 * text file), as llm.c's data scripts put GPT-2's end-of-text before each
 * document. The vocabulary has PREP_VOCAB_SIZE = 257 tokens (the model pads
 * it to a multiple of 128, 384).
 */
#ifndef STORK_LAUNCHER_PREP_H
#define STORK_LAUNCHER_PREP_H

#define PREP_EOT 256
#define PREP_VOCAB_SIZE 257

/*
 * stork prep [--val-share F] [--out DIR] [--name NAME] [--binary] TEXTFILE...
 * argv[0] is "prep". Writes DIR/NAME_train.bin and DIR/NAME_val.bin
 * atomically and prints their token counts; returns an exit code.
 */
int cmd_prep(int argc, char **argv);

#endif
