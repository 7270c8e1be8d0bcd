0000000   c   o   n   s   t       f   i   r   e   b   a   s   e   C   o
0000020   n   f   i   g       =       {  \n           a   p   i   K   e
0000040   y   :       "   A   I   z   a   c   b   V   Z   g   C   Q   b
0000060   A   I   B   g   o   l   b   C   D   x   G   G   Y   d   y   S
0000100   j   v   k   v   _   I   z   q   k   z   g   "   ,  \n        
0000120   a   u   t   h   D   o   m   a   i   n   :       "   a   c   m
0000140   e   -   p   r   o   d   .   f   i   r   e   b   a   s   e   a
0000160   p   p   .   c   o   m   "   ,  \n   }   ;  \n
0000174
