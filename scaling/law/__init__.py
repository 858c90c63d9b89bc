"""The law artifact: law.json's schema, its packed draws, how one is built, the
`ScalingLaw` read from it, its text, published laws and laws from coefficients."""
